"""Language-model recipe: `python -m recipes.lm --synthesizer=VARIANT`.

Modules: `data` (text files, the built-in corpus, tensorflow_datasets, the
stream and sentence cuts, evaluation windows) is pure Python; `tokenizers`
(char, byte, WordPiece), `model` (the `SynthesizerCausalLM`, its input
pipeline, scoring, sampling, attention maps), `evaluation`, `export` (the
serving SavedModel) and `train` (the command) use TensorFlow.
"""
