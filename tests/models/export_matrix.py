"""Measures the export support matrix on the current backend: every task x
variant x format exported with `export_model`, reloaded in its runtime and
compared with Keras. Prints one JSON line per cell.

    KERAS_BACKEND=jax python -m tests.models.export_matrix > jax.jsonl
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
        export_model(model, path, format)
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


def main(argv):
    tasks = argv[1].split(",") if len(argv) > 1 else eu.TASKS
    variants = argv[2].split(",") if len(argv) > 2 else eu.VARIANTS
    with tempfile.TemporaryDirectory() as folder:
        for format in eu.FORMATS:
            for task in tasks:
                for variant in variants:
                    cell = measure(task, variant, format, folder)
                    cell.update(backend=keras.backend.backend(),
                                format=format, task=task, variant=variant)
                    print(json.dumps(cell), flush=True)


if __name__ == "__main__":
    main(sys.argv)
