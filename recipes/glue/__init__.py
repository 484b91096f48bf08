"""GLUE recipe: `python -m recipes.glue --task=TASK --synthesizer=VARIANT`.

Modules: `tasks` (the task table, GLUE's and SuperGLUE's), `tsv` (GLUE's
TSV files), `jsonl` (SuperGLUE's JSONL files), `metrics` (official
metrics), `loading` (built-in / TSV / JSONL / tensorflow_datasets) are pure
Python; `model`, `export` and `train` use TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="glue",
    description="train and evaluate Synthesizer encoders on GLUE",
    smoke={"builtin": (
        "--task=builtin", "--synthesizer=random+vanilla",
        "--max_train_examples=64", "--batch_size=16", "--max_length=32",
        "--vocab_size=300", *SMALL)},
    exports=("preset",), saved_model=True)
