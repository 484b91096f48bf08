"""Language-model recipe: `python -m recipes.lm --synthesizer=VARIANT`.

Modules: `data` (text files, the built-in corpus, tensorflow_datasets, the
stream and sentence cuts, evaluation windows) is pure Python; `tokenizers`
(char, byte, WordPiece), `model` (the `SynthesizerCausalLM`, its input
pipeline, scoring, sampling, attention maps), `evaluation`, `export` (the
serving SavedModel) and `train` (the command) use TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="lm",
    description="train a causal language model, generate, score",
    smoke={"builtin": (
        "--dataset=builtin", "--synthesizer=random+vanilla",
        "--sequence_length=16", "--max_train_examples=200", "--batch_size=32",
        "--max_new_tokens=4", *SMALL)},
    exports=("preset",), saved_model=True)
