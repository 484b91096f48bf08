"""Pretraining recipe: `python -m recipes.pretrain --objective=mlm|span_corruption`.

Modules: `data` (the corpus: text files, the built-in corpus,
tensorflow_datasets; packing token streams into full windows; the
held-out split) is pure Python and NumPy; `objectives` (the masked LM on
`SynthesizerBackbone` and span corruption on `SynthesizerSeq2SeqBackbone`:
models, input pipelines, held-out scoring) and `train` (the command) use
TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="pretrain",
    description="pretrain on plain text (masked LM, span corruption) "
    "for --preset fine-tuning",
    smoke={"mlm": (
        "--objective=mlm", "--synthesizer=random+vanilla",
        "--sequence_length=16", "--vocab_size=200", "--max_train_examples=200",
        "--batch_size=16", "--steps_per_epoch=4", *SMALL)},
    exports=("preset",))
