"""Runnable training recipes built on keras-synth.

- `python -m recipes.benchmark`: speed and memory against MultiHeadAttention.
- `python -m recipes.dialogue`: train an encoder-decoder, respond, score
  BLEU/ROUGE-L (persona + history -> response).
- `python -m recipes.glue`: train and evaluate Synthesizer encoders on GLUE.
- `python -m recipes.lm`: train a causal language model, generate, score.
- `python -m recipes.lra`: train on Long Range Arena (ListOps, byte-level
  text).
- `python -m recipes.pretrain`: pretrain on plain text (masked LM, span
  corruption) for --preset fine-tuning.
- `python -m recipes.summarize`: train an encoder-decoder, summarize, score
  ROUGE.
- `python -m recipes.translate`: train an encoder-decoder, translate, score.

Each recipe declares itself once, in its folder's `__init__.py`
(`RECIPE`, `recipes.registry`); `python -m recipes` lists them.

`recipes.core` holds what every recipe shares (data-file checks, WordPiece
vocabularies, tf.distribute strategies, precision flags and the run
directory). Recipes run on the TensorFlow, JAX and PyTorch backends
(tf.data input; the SavedModel export on TensorFlow). `recipes.cli` holds
their command-line helpers (`--help` texts, "did you mean", quiet TensorFlow logs unless `--tf_logs`) and
`recipes.serving` what an export needs (`export/assets/README.md`).
"""
