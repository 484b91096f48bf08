"""Long Range Arena recipe: `python -m recipes.lra --task=listops|text`.

Modules: `listops` (the seeded generator, LRA's TSV files, tokens) and
`text` (the byte-level text sets) are pure Python; `sequences` (padding
and cut counts) needs NumPy and the byte tokenizer; `model` and `train`'s
`run` use TensorFlow.
"""
