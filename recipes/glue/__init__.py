"""GLUE recipe: `python -m recipes.glue --task=TASK --synthesizer=VARIANT`.

Modules: `tasks` (the task table), `tsv` (GLUE's TSV files), `metrics`
(official metrics), `loading` (built-in / TSV / tensorflow_datasets) are pure
Python; `model`, `export` and `train` use TensorFlow.
"""
