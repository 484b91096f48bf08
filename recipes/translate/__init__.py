"""Translation recipe: `python -m recipes.translate --src=de --tgt=en
--synthesizer=VARIANT`.

Modules: `data` (parallel text files, the built-in task, tensorflow_datasets)
is pure Python; `model` (tokenization, the encoder-decoder, loss and
schedule), `decoding` (greedy and beam search), `export` (the serving
SavedModel) and `train` (the command) use TensorFlow.
"""
