"""SavedModel export (raw strings in, predictions out), the preset and
attention plots."""

import numpy as np

from keras_synth.models import export_text_classifier
from recipes import serving
from recipes.core import experiment
from recipes.core import storage


def input_names(task):
    return ("sentence",) if task.num_segments == 1 else (
        "sentence1", "sentence2")


def export_saved_model(path, model, task):
    """Writes a SavedModel whose `serving_default` takes raw strings
    (`keras_synth.models.export_text_classifier` of `model`, its
    preprocessor attached).

    Inputs: `sentence` (single-sentence tasks) or `sentence1` and
    `sentence2`, string tensors of shape `(batch,)`. Outputs:
    `probabilities (batch, classes)`, `label (batch,)` (class index) and
    `label_name` (GLUE's label string), or `score (batch,)` for STS-B.
    Tokenization and packing are inside the graph.
    """
    return serving.write_export(
        path,
        lambda tmp: export_text_classifier(model, tmp,
                                           label_names=task.labels,
                                           input_names=input_names(task)),
        lambda where: export_usage(where, task))


def export_usage(path, task):
    """How to load and call the export at `path` (see `serving.usage`);
    also written as `<path>/assets/README.md`."""
    text = "string tensor `(batch,)`, raw text (tokenized inside)"
    inputs = {name: text for name in input_names(task)}
    if task.is_regression:
        outputs = {"score": "float32 `(batch,)`"}
    else:
        outputs = {
            "probabilities": "float32 `(batch, classes)`",
            "label": "int32 `(batch,)`, the class index",
            "label_name": "string `(batch,)`: "
            + ", ".join(task.labels or ()),
        }
    example = ", ".join(
        f'{name}=tf.constant(["a fine film ."])' for name in inputs)
    return serving.usage(path, "serving_default", inputs, outputs, example)


def example_caption(task, label, outputs):
    """`"true label: x, predicted: y (p=0.93)"` for one example's outputs
    (`(1, classes)` logits, or `(1,)` / `(1, 1)` for STS-B's score)."""
    outputs = np.asarray(outputs, dtype="float64").reshape(-1)
    if task.is_regression:
        return f"true score: {float(label):.2f}, predicted: {outputs[0]:.2f}"
    probabilities = np.exp(outputs - outputs.max())
    probabilities /= probabilities.sum()
    predicted = int(probabilities.argmax())
    names = task.labels or tuple(str(i) for i in range(len(outputs)))
    return (f"true label: {names[int(label)]}, predicted: {names[predicted]}"
            f" (p={probabilities[predicted]:.2f})")


def plot_attention(path, scores, tokens, title="", caption=""):
    """Saves a PNG grid (layers x heads) of one example's attention maps.

    Rows of a map are queries, columns keys (token labels up to 32 tokens);
    one colour scale (attention weight, 0 to the largest weight shown) is
    shared by all maps.

    Args:
        path: the PNG file.
        scores: list (one per layer) of `(heads, L, L)` arrays.
        tokens: the example's tokens, padding excluded (length `n`); maps
            are cut to `n x n`.
        title: the first line of the figure's title (e.g. the example).
        caption: a second line (e.g. `example_caption`'s true and
            predicted label).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(tokens)
    maps = [[np.asarray(layer_scores[head])[:n, :n]
             for head in range(layer_scores.shape[0])]
            for layer_scores in scores]
    layers, heads = len(maps), len(maps[0])
    vmax = max(float(m.max()) for row in maps for m in row) or 1.0
    fig, axes = plt.subplots(
        layers, heads, figsize=(2.4 * heads + 1.2, 2.4 * layers + 0.9),
        squeeze=False,
    )
    image = None
    for layer, row in enumerate(maps):
        for head, weights in enumerate(row):
            ax = axes[layer][head]
            image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=vmax)
            ax.set_title(f"layer {layer} head {head}", fontsize=7)
            if n <= 32:
                ax.set_xticks(range(n))
                ax.set_yticks(range(n))
                ax.set_xticklabels(tokens, rotation=90, fontsize=4)
                ax.set_yticklabels(tokens, fontsize=4)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
            if layer == layers - 1:
                ax.set_xlabel("key", fontsize=7)
            if head == 0:
                ax.set_ylabel("query", fontsize=7)
    text = "\n".join(t for t in (title, caption) if t)
    if text:
        fig.suptitle(text, fontsize=8)
    fig.tight_layout(rect=(0.0, 0.0, 0.9, 1.0))
    bar = fig.colorbar(image, ax=axes, fraction=0.03, pad=0.02)
    bar.set_label("attention weight", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    storage.save_figure(fig, path, dpi=130)
    plt.close(fig)
    return path


def export_run(run_dir, model, probe, preprocessor, task, evals,
               test_predictions, args, log=print):
    """What the chief writes once the model is trained: test-set
    submissions (`test_predictions`: split -> `(data, predictions)`, made
    by every worker: a multi-worker `predict` gathers over the workers),
    the attention maps of the first evaluation example, the SavedModel
    (with `--export`; off TensorFlow the `.keras` model, and on JAX the
    SavedModel of the token-id model) and the keras-hub preset.

    Returns:
        The entries of `results.json` that name them.
    """
    from recipes.glue import model as model_lib
    from recipes.glue import jsonl, tsv

    submissions = {}
    for split, (data, predictions) in test_predictions.items():
        path = run_dir.path("submission", task.test_splits[split][2])
        (jsonl if task.is_superglue else tsv).write_submission(
            path, task, data.ids, predictions)
        submissions[split] = path

    example = evals[next(iter(evals))]
    example_inputs = model_lib.pack(preprocessor, tuple(
        [example.texts[0][i]] for i in range(task.num_segments)))
    import keras

    # NumPy of any backend (a PyTorch output tensor still requires grad).
    scores = [keras.ops.convert_to_numpy(s)[0] for s in probe(example_inputs)]
    n = int(example_inputs["padding_mask"].numpy()[0].sum())
    tokens = model_lib.tokens(preprocessor,
                              example_inputs["token_ids"].numpy()[0][:n])
    plot_path = plot_attention(
        run_dir.path("attention.png"), scores, tokens,
        title=f"{task.name} / {args.synthesizer}: "
        + " | ".join(example.texts[0])[:120],
        caption=example_caption(task, example.labels[0],
                                keras.ops.convert_to_numpy(
                                    model(example_inputs, training=False))),
    )

    # From here on the model takes raw strings (the export, the `.keras`
    # model and the preset hold the preprocessor).
    model.preprocessor = preprocessor
    exported = experiment.saved_model_export(
        args, run_dir, lambda path, m: export_saved_model(path, m, task),
        lambda path: export_usage(path, task), "raw strings in", log)(model)
    preset_path = serving.save_preset(run_dir.path("preset"), model)
    log(f"Saved a keras-hub preset to {preset_path}")
    return {
        "submissions": submissions,
        "attention_png": plot_path,
        **exported,
        "preset": preset_path,
    }
