"""Summarization recipe: `python -m recipes.summarize
--synthesizer=VARIANT` (document -> summary, ROUGE-1/2/L).

Modules: `data` (`document<TAB>summary` files, the built-in task,
tensorflow_datasets' cnn_dailymail) and `metrics` (ROUGE's log line,
lead-3) are pure Python; `train` (the command) runs the shared
encoder-decoder (`recipes.core.seq2seq_run.run_seq2seq`) and uses
TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="summarize",
    description="train an encoder-decoder, summarize, score ROUGE",
    smoke={"builtin": (
        "--dataset=builtin", "--synthesizer=dense+vanilla",
        "--max_source_length=48", "--max_target_length=16",
        "--vocab_size=300", "--max_train_examples=128", "--batch_size=32",
        "--warmup_steps=2", "--beam_size=2", "--max_decode_examples=32",
        *SMALL)},
    exports=("keras_model",), saved_model=True)
