"""The translation recipe under MirroredStrategy over two logical CPUs
(TensorFlow backend only; in a subprocess, see `two_cpus`)."""

import keras
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "tf.distribute.MirroredStrategy is TensorFlow's (JAX's data "
        "parallelism, keras.distribution: test_recipes_on_backends.py)",
        allow_module_level=True,
    )

from tests.recipes.two_cpus import run_with_two_cpus  # noqa: E402

SCRIPT = """
import json, sys
import sacrebleu
from recipes.translate import data, train

results = train.run(train.build_parser().parse_args([
    "--src=de", "--tgt=en", "--dataset=builtin", "--strategy=mirrored",
    "--synthesizer=random", "--epochs=2", "--max_train_examples=256",
    "--batch_size=32", "--max_length=24", "--hidden_dim=16",
    "--num_heads=2", "--num_layers=1", "--vocab_size=200",
    "--learning_rate=3e-3", "--warmup_steps=5", "--beam_size=2",
    "--verbose=0", "--no_export", "--no_tensorboard",
    "--max_decode_examples=48",
    "--model_dir=" + sys.argv[1]]), log=lambda *_: None)
with open(results["hypotheses"]["test"], encoding="utf-8") as f:
    hypotheses = f.read().splitlines()
references = [list(data.load_files(data.builtin_files("de", "en"))[
    "test"].tgt[:48])]
print("RESULT " + json.dumps({
    "bleu_recomputed": sacrebleu.corpus_bleu(hypotheses, references).score,
    "chrf_recomputed": sacrebleu.corpus_chrf(hypotheses, references).score,
    "hypotheses": len(hypotheses),
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
    assert result["sentences"] == result["hypotheses"] == 48
    # The scores are those of the written translations (recomputed), and
    # the translations share character n-grams with the references.
    assert result["bleu"]["test"] == pytest.approx(
        result["bleu_recomputed"], abs=1e-6)
    assert result["chrf"]["test"] == pytest.approx(
        result["chrf_recomputed"], abs=1e-6)
    assert result["chrf"]["test"] > 0.0
