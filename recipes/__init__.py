"""Runnable training recipes built on keras-synth.

- `python -m recipes.glue`: train and evaluate Synthesizer encoders on GLUE.

`recipes.common` holds what every recipe shares (data-file checks, WordPiece
vocabularies, tf.distribute strategies, precision flags and the run
directory). Recipes run on the TensorFlow backend (tf.data, tf.distribute,
SavedModel export).
"""
