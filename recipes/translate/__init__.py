"""Translation recipe: `python -m recipes.translate --src=de --tgt=en
--synthesizer=VARIANT`.

Modules: `data` (parallel text files, the built-in task, tensorflow_datasets)
is pure Python; `train` (the command) runs the shared encoder-decoder
(`recipes.core.seq2seq_run.run_seq2seq`: the model, decoding, the serving
SavedModel) and uses TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="translate",
    description="train an encoder-decoder, translate, score",
    smoke={"builtin": (
        "--src=de", "--tgt=en", "--dataset=builtin",
        "--synthesizer=random+vanilla", "--max_length=16", "--vocab_size=300",
        "--max_train_examples=128", "--batch_size=32", "--warmup_steps=2",
        "--beam_size=2", "--max_decode_examples=32", *SMALL)},
    exports=("keras_model",), saved_model=True)
