"""Dialogue recipe: `python -m recipes.dialogue --synthesizer=VARIANT`
(persona + history -> response, BLEU-1/4 and ROUGE-L).

Modules: `data` (PersonaChat's released text format, the built-in chats)
and `metrics` (sacrebleu's BLEU, ROUGE-L) are pure Python; `train` (the
command) runs the shared encoder-decoder
(`recipes.core.seq2seq_run.run_seq2seq`) as the summarization recipe does,
and uses TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="dialogue",
    description="train an encoder-decoder, respond, score BLEU/ROUGE-L",
    smoke={"builtin": (
        "--dataset=builtin", "--synthesizer=dense",
        "--max_source_length=48", "--max_target_length=16",
        "--vocab_size=300", "--max_train_examples=128", "--batch_size=32",
        "--warmup_steps=2", "--beam_size=2", "--max_decode_examples=32",
        *SMALL)},
    exports=("keras_model",), saved_model=True)
