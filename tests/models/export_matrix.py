"""Measures the export support matrix on the current backend: every task x
variant x format exported with `export_model`, reloaded in its runtime and
compared with Keras. Prints one JSON line per cell.

    KERAS_BACKEND=jax python -m tests.models.export_matrix > jax.jsonl
    python -m tests.models.export_matrix --table *.jsonl  # docs/export.md

Optional arguments: comma-separated tasks, variants, formats.
"""

import json
import sys
import tempfile
import time

import keras
import numpy as np

from keras_synth.models import ExportError
from keras_synth.models import export_model
from keras_synth.models.export_formats import SUFFIXES
from tests.models import export_utils as eu


def measure(task, variant, format, folder):
    model, x = eu.make_task(task, variant)
    expected = eu.keras_outputs(model, x)
    path = f"{folder}/{task}_{variant.replace('+', '_')}{SUFFIXES[format]}"
    start = time.time()
    try:
        export_model(model, path, format, batch_size=eu.BATCH,
                     num_predictions=eu.PREDICTIONS)
    except (ExportError, ImportError) as error:
        return {"status": "refused", "message": str(error)}
    run = eu.run_onnx if format == "onnx" else eu.run_litert
    try:
        got = run(path, x)
    except Exception as error:
        return {"status": "runtime_error",
                "message": f"{type(error).__name__}: {str(error)[:300]}"}
    error = max(float(np.max(np.abs(a - b)))
                for a, b in eu.match_outputs(expected, got))
    return {"status": "ok", "max_abs_error": error,
            "export_s": round(time.time() - start, 1)}


def cause_of(cell):
    message = cell["message"]
    if "needs the `" in message:  # the converter is not installed
        return "not installed: " + message.split("needs the ", 1)[1]
    return message.split(" backend: ", 1)[-1]


def table(paths):
    """The markdown support matrix of the JSON lines in `paths`: "ok (max
    abs error)" or "no [n]", n numbering the causes listed below it."""
    cells = [json.loads(line) for path in paths for line in open(path)
             if line.startswith("{")]
    columns = [(f, b) for f in eu.FORMATS for b in eu.BACKENDS]
    found = {(c["format"], c["backend"], c["task"], c["variant"]): c
             for c in cells}
    causes = []

    def text(key):
        if key not in found:
            return "not measured"
        cell = found[key]
        if cell["status"] == "ok":
            return f"ok ({cell['max_abs_error']:.0e})"
        cause = cause_of(cell)
        if cause not in causes:
            causes.append(cause)
        return f"no [{causes.index(cause) + 1}]"

    lines = ["| task | variant | " + " | ".join(
        f"{f} / {b}" for f, b in columns) + " |",
        "|---|---|" + "---|" * len(columns)]
    for task in eu.TASKS:
        for variant in eu.VARIANTS:
            row = [text((f, b, task, variant)) for f, b in columns]
            lines.append(f"| {task} | `{variant}` | " + " | ".join(row) + " |")
    lines.append("")
    lines += [f"{i}. {cause}" for i, cause in enumerate(causes, 1)]
    return "\n".join(lines)


def main(argv):
    if len(argv) > 1 and argv[1] == "--table":
        print(table(argv[2:]))
        return
    tasks = argv[1].split(",") if len(argv) > 1 else eu.TASKS
    variants = argv[2].split(",") if len(argv) > 2 else eu.VARIANTS
    formats = argv[3].split(",") if len(argv) > 3 else eu.FORMATS
    with tempfile.TemporaryDirectory() as folder:
        for format in formats:
            for task in tasks:
                for variant in variants:
                    cell = measure(task, variant, format, folder)
                    cell.update(backend=keras.backend.backend(),
                                format=format, task=task, variant=variant)
                    print(json.dumps(cell), flush=True)


if __name__ == "__main__":
    main(sys.argv)
