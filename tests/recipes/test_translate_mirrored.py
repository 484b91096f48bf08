"""The translation recipe under MirroredStrategy over two logical CPUs
(TensorFlow backend only; in a subprocess, see `two_cpus`)."""

import keras
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "tf.distribute.MirroredStrategy needs the TensorFlow backend (the "
        "recipes run on it only)",
        allow_module_level=True,
    )

from tests.recipes.two_cpus import run_with_two_cpus  # noqa: E402

SCRIPT = """
import json, sys
from recipes.translate import train

results = train.run(train.build_parser().parse_args([
    "--src=de", "--tgt=en", "--dataset=builtin", "--strategy=mirrored",
    "--synthesizer=random", "--epochs=2", "--max_train_examples=256",
    "--batch_size=32", "--max_length=24", "--hidden_dim=16",
    "--num_heads=2", "--num_layers=1", "--vocab_size=200",
    "--learning_rate=3e-3", "--warmup_steps=5", "--beam_size=2",
    "--verbose=0", "--no_export", "--no_tensorboard",
    "--model_dir=" + sys.argv[1]]), log=lambda *_: None)
print("RESULT " + json.dumps({
    "replicas": results["num_replicas"],
    "losses": [h["loss"] for h in results["history"]],
    "bleu": results["bleu"], "chrf": results["chrf"],
    "sentences": results["decoding"]["test"]["sentences"],
}))
"""


def test_mirrored_two_cpus_trains_and_translates(tmp_path):
    result = run_with_two_cpus(SCRIPT, tmp_path / "run")
    assert result["replicas"] == 2
    losses = result["losses"]
    assert len(losses) == 2 and all(loss == loss for loss in losses)
    assert losses[1] < losses[0]
    assert result["sentences"] == 200
    assert 0.0 <= result["bleu"]["test"] <= 100.0
    assert 0.0 < result["chrf"]["test"] <= 100.0
