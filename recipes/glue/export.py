"""SavedModel export (raw strings in, predictions out), the preset and
attention plots."""

import os

import numpy as np

from recipes import common

common.require_tensorflow_backend()

from keras_synth.models import export_text_classifier  # noqa: E402


def input_names(task):
    return ("sentence",) if task.num_segments == 1 else (
        "sentence1", "sentence2")


def export_saved_model(path, model, preprocessor, task):
    """Writes a SavedModel whose `serving_default` takes raw strings
    (`keras_synth.models.export_text_classifier`).

    Inputs: `sentence` (single-sentence tasks) or `sentence1` and
    `sentence2`, string tensors of shape `(batch,)`. Outputs:
    `probabilities (batch, classes)`, `label (batch,)` (class index) and
    `label_name` (GLUE's label string), or `score (batch,)` for STS-B.
    Tokenization and packing are inside the graph. `model` gets
    `preprocessor` attached (it then takes raw strings).
    """
    model.preprocessor = preprocessor
    # Written to a temporary folder, then renamed: a kill while exporting
    # never leaves a half-written SavedModel at `path`.
    common.atomic_write(path, lambda tmp: export_text_classifier(
        model, tmp, label_names=task.labels, input_names=input_names(task)))
    return path


def save_preset(path, model, preprocessor):
    """Saves `model` with `preprocessor` as a keras-hub preset directory
    (`SynthesizerTextClassifier.from_preset(path)` takes raw strings)."""
    model.preprocessor = preprocessor
    common.atomic_write(path, model.save_to_preset)
    return path


def plot_attention(path, scores, tokens, title=""):
    """Saves a PNG grid (layers x heads) of one example's attention maps.

    Args:
        path: the PNG file.
        scores: list (one per layer) of `(heads, L, L)` arrays.
        tokens: the example's tokens, padding excluded (length `n`); maps
            are cut to `n x n`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(tokens)
    layers, heads = len(scores), scores[0].shape[0]
    fig, axes = plt.subplots(
        layers, heads, figsize=(2.4 * heads + 0.5, 2.4 * layers + 0.6),
        squeeze=False,
    )
    for layer, layer_scores in enumerate(scores):
        for head in range(heads):
            ax = axes[layer][head]
            ax.imshow(np.asarray(layer_scores[head])[:n, :n],
                      cmap="viridis", vmin=0.0)
            ax.set_title(f"layer {layer} head {head}", fontsize=7)
            if n <= 32:
                ax.set_xticks(range(n))
                ax.set_yticks(range(n))
                ax.set_xticklabels(tokens, rotation=90, fontsize=4)
                ax.set_yticklabels(tokens, fontsize=4)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
