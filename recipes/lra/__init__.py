"""Long Range Arena recipe: `python -m recipes.lra --task=listops|text`.

Modules: `listops` (the seeded generator, LRA's TSV files, tokens) and
`text` (the byte-level text sets) are pure Python; `sequences` (padding
and cut counts) needs NumPy and the byte tokenizer; `model` and `train`'s
`run` use TensorFlow.
"""

from recipes.registry import SMALL, Recipe

RECIPE = Recipe(
    name="lra",
    description="train on Long Range Arena (ListOps, byte-level text)",
    smoke={"listops": (
        "--task=listops", "--synthesizer=factorized_random",
        "--max_length=128", "--listops_train_size=64",
        "--listops_val_size=16", "--listops_test_size=16", "--batch_size=16",
        *SMALL), "text": (
        "--task=text", "--synthesizer=factorized_random", "--max_length=256",
        "--batch_size=16", "--steps_per_epoch=4", *SMALL)},
    exports=("preset",), saved_model=True)
