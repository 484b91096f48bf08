"""Runnable training recipes built on keras-synth.

- `python -m recipes.glue`: train and evaluate Synthesizer encoders on GLUE.
- `python -m recipes.translate`: train an encoder-decoder, translate, score.
- `python -m recipes.benchmark`: speed and memory against MultiHeadAttention.

`recipes.core` holds what every recipe shares (data-file checks, WordPiece
vocabularies, tf.distribute strategies, precision flags and the run
directory). Recipes run on the TensorFlow backend (tf.data, tf.distribute,
SavedModel export). `recipes.cli` holds their command-line helpers (`--help`
texts, "did you mean", quiet TensorFlow logs unless `--tf_logs`) and
`recipes.serving` what an export needs (`export/assets/README.md`).
"""
