"""`python -m recipes.glue.quantize`: a fine-tuned GLUE classifier against
its int8 copy (Keras's `model.quantize`): size on disk, CPU inference
speed, and how often the two predict the same class on a GLUE split.

Examples:

    # The preset a GLUE run wrote (<model_dir>/preset), on SST-2's dev set:
    python -m recipes.glue.quantize \\
        --preset=runs/glue/sst2-random_vanilla/preset \\
        --task=sst2 --data_dir=glue_data/SST-2

It writes, in `--output_dir` (default: `<preset>-<mode>`, next to the
preset): `preset/` (the quantized classifier, raw strings in, as
`SynthesizerTextClassifier.from_preset` loads it), `float.keras` and
`<mode>.keras` (the two models as `.keras` files, to compare sizes) and
`results.json` (sizes in bytes, sentences per second of both, accuracy of
both, agreement, the largest logit difference).
"""

import argparse
import json
import os
import time

from recipes import cli
from recipes.core import flags

PROG = "python -m recipes.glue.quantize"
MODES = ("int8", "int4")


def build_parser():
    parser = cli.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", required=True,
                        help="A SynthesizerTextClassifier preset folder with "
                        "its preprocessor (a GLUE run's <model_dir>/preset).")
    parser.add_argument("--task", default="sst2",
                        help="The GLUE task whose split is predicted "
                        "(default sst2; `builtin` for the offline task).")
    parser.add_argument("--data_dir", default=None,
                        help="GLUE's TSV files of the task (default: "
                        "tensorflow_datasets).")
    parser.add_argument("--split", default=None,
                        help="The labelled split to predict (default: the "
                        "task's first evaluation split, e.g. dev).")
    parser.add_argument("--mode", choices=MODES, default="int8",
                        help="Keras's quantization mode (default int8).")
    parser.add_argument("--batch_size", type=flags.positive_int, default=32)
    parser.add_argument("--repetitions", type=flags.positive_int, default=3,
                        help="Timed passes over the split per model (after "
                        "one untimed pass); the median is reported.")
    parser.add_argument("--output_dir", default=None,
                        help="Where the quantized preset and results.json "
                        "go (default: <preset>-<mode>).")
    return parser


def validate_args(args):
    if not os.path.isfile(os.path.join(args.preset, "config.json")):
        raise ValueError(f"Argument `--preset`={args.preset!r} is not a "
                         "preset folder (no config.json in it).")
    if args.output_dir is None:
        args.output_dir = os.path.normpath(args.preset) + "-" + args.mode


def folder_bytes(path):
    """Bytes of the files under `path` (or of the file `path`)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def token_id_batches(preprocessor, texts, batch_size):
    """The split as the classifier's inputs, in batches (preprocessed once,
    outside the timing)."""
    import numpy as np
    from keras import ops

    batches = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        columns = tuple(list(c) for c in zip(*chunk))
        x = preprocessor(columns[0] if len(columns) == 1 else columns)
        batches.append({k: np.asarray(ops.convert_to_numpy(v))
                        for k, v in x.items()})
    return batches


def cut_examples(preprocessor, texts):
    """How many examples the preprocessor cuts: longer than its
    `sequence_length` with the special tokens (`[CLS] a [SEP] (b [SEP])`)."""
    import numpy as np

    total = np.full(len(texts), len(texts[0]) + 1)
    for column in zip(*texts):
        ids = preprocessor.tokenizer(list(column))
        total += (np.asarray(ids.row_lengths()) if hasattr(ids, "row_lengths")
                  else np.array([len(row) for row in ids]))
    return int(np.sum(total > preprocessor.sequence_length))


def timed_logits(model, batches, repetitions):
    """`(logits, median seconds of one pass)`: `predict_on_batch` over the
    batches, one untimed pass first (compilation)."""
    import numpy as np

    def one_pass():
        return np.concatenate([np.asarray(model.predict_on_batch(b))
                               for b in batches])

    logits = one_pass()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        one_pass()
        times.append(time.perf_counter() - start)
    return logits, float(np.median(times))


def run(args, log=print):
    import keras
    import numpy as np

    from keras_synth.models import SynthesizerTextClassifier
    from recipes.glue import loading
    from recipes.glue import metrics as metrics_lib
    from recipes.glue import tasks as tasks_lib

    task = tasks_lib.get_task(args.task)
    _, evals, _ = loading.load_task_data(task, args.data_dir)
    split_name = args.split or next(iter(evals))
    if split_name not in evals:
        raise ValueError(f"Argument `--split`={split_name!r}: task "
                         f"{task.name} has the labelled splits "
                         f"{sorted(evals)}.")
    split = evals[split_name]
    os.makedirs(args.output_dir, exist_ok=True)

    models = {}
    for name in ("float", args.mode):
        model = SynthesizerTextClassifier.from_preset(args.preset)
        if name != "float":
            model.quantize(args.mode)
        models[name] = model
    # Each model's own preprocessor makes its batches: on JAX a task whose
    # preprocessor was never called, then detached, predicts op by op.
    inputs = {name: token_id_batches(model.preprocessor, split.texts,
                                     args.batch_size)
              for name, model in models.items()}
    batches = inputs["float"]
    length = models["float"].preprocessor.sequence_length
    cut = cut_examples(models["float"].preprocessor, split.texts)
    log(f"{task.name} {split_name}: {len(split.texts)} examples in "
        f"{len(batches)} batches of up to {args.batch_size}, length "
        f"{length} (the preset's; {cut} longer examples cut to it).")

    quantized_preset = os.path.join(args.output_dir, "preset")
    models[args.mode].save_to_preset(quantized_preset)
    sizes = {"float_preset_bytes": folder_bytes(args.preset),
             f"{args.mode}_preset_bytes": folder_bytes(quantized_preset)}
    for name, model in models.items():
        path = os.path.join(args.output_dir, f"{name}.keras")
        model.save(path)
        sizes[f"{name}_keras_bytes"] = folder_bytes(path)

    results = {"task": task.name, "split": split_name, "mode": args.mode,
               "preset": args.preset, "examples": len(split.texts),
               "sequence_length": length, "cut_examples": cut,
               "batch_size": args.batch_size, "backend": keras.backend.backend(),
               **sizes}
    logits = {}
    for name, model in models.items():
        model.preprocessor = None  # token ids in: the network alone is timed
        logits[name], seconds = timed_logits(model, inputs[name],
                                             args.repetitions)
        predictions = logits[name].argmax(axis=-1)
        results[f"{name}_sentences_per_second"] = len(split.texts) / seconds
        results[f"{name}_metrics"] = metrics_lib.compute_metrics(
            task, split.labels, predictions)
    float_logits, quantized_logits = logits["float"], logits[args.mode]
    results["agreement"] = float(np.mean(
        float_logits.argmax(-1) == quantized_logits.argmax(-1)))
    results["max_abs_logit_difference"] = float(
        np.abs(quantized_logits - float_logits).max())
    results["max_abs_float_logit"] = float(np.abs(float_logits).max())
    results["speedup"] = (results[f"{args.mode}_sentences_per_second"]
                          / results["float_sentences_per_second"])

    reloaded = SynthesizerTextClassifier.from_preset(quantized_preset)
    again = np.asarray(reloaded.predict(
        [t[0] for t in split.texts[:args.batch_size]]
        if len(split.texts[0]) == 1 else
        tuple(list(c) for c in zip(*split.texts[:args.batch_size])),
        verbose=0))
    results["reloaded_max_abs_difference"] = float(
        np.abs(again - quantized_logits[:len(again)]).max())

    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    mib = 2 ** 20
    log(f"Size on disk (preset): float {sizes['float_preset_bytes'] / mib:.2f}"
        f" MiB, {args.mode} {sizes[f'{args.mode}_preset_bytes'] / mib:.2f} "
        f"MiB (.keras: {sizes['float_keras_bytes'] / mib:.2f} / "
        f"{sizes[f'{args.mode}_keras_bytes'] / mib:.2f} MiB).")
    log(f"Speed ({results['backend']}, batch {args.batch_size}): float "
        f"{results['float_sentences_per_second']:.0f} sentences/s, "
        f"{args.mode} {results[f'{args.mode}_sentences_per_second']:.0f} "
        f"({results['speedup']:.2f}x).")
    log(f"{split_name} {task.main_metric}: float "
        f"{results['float_metrics'][task.main_metric]:.4f}, {args.mode} "
        f"{results[f'{args.mode}_metrics'][task.main_metric]:.4f}; the same "
        f"class for {results['agreement']:.2%} of the examples; largest "
        f"logit difference {results['max_abs_logit_difference']:.4f} "
        f"(largest float logit {results['max_abs_float_logit']:.2f}).")
    log(f"Results: {os.path.join(args.output_dir, 'results.json')}")
    return results


def main(argv=None):
    from recipes.core import runtime

    return runtime.run_main(build_parser(), run, PROG, argv,
                            validate=lambda args, check_options=True:
                            validate_args(args),
                            input_paths=("preset", "data_dir"))


if __name__ == "__main__":
    import sys

    sys.exit(main())
