"""`python -m recipes.pretrain` end to end on the built-in corpus: a run
SIGKILLed in the middle of an epoch resumes from its backup, scores the
held-out windows and writes a preset that `recipes.glue --preset` and
`SynthesizerTextClassifier.from_preset` fine-tune from with the pretrained
weights (TensorFlow backend, as the recipes)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.recipes.core.tensorflow_only import requires_tensorflow
from tests.recipes.progress_run import kill_at
from tests.recipes.progress_run import run_here

pytestmark = requires_tensorflow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TINY = ["--hidden_dim=16", "--num_heads=2", "--num_layers=1",
        "--sequence_length=24", "--vocab_size=300", "--batch_size=16",
        "--max_train_examples=600", "--learning_rate=3e-3", "--dropout=0",
        "--verbose=2", "--no_tensorboard", "--seed=0"]


def _start(objective, run_dir, *extra):
    """The recipe with a line after every training batch
    (`tests/recipes/progress_run.py`)."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONUNBUFFERED="1",
               PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recipes.progress_run",
         "recipes.pretrain", f"--objective={objective}",
         f"--model_dir={run_dir}", *TINY, *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def _run_here(objective, run_dir, *extra):
    """The recipe in this process: `(exit status, output)`."""
    return run_here("recipes.pretrain", [
        f"--objective={objective}", f"--model_dir={run_dir}", *TINY, *extra])


def _results(run_dir):
    with open(os.path.join(run_dir, "results.json")) as f:
        return json.load(f)


# The masked LM is killed and resumed on every backend by the recipe
# harness (its smoke command); span corruption is killed and resumed here.
@pytest.mark.parametrize("objective, killed", [("mlm", False),
                                               ("span_corruption", True)])
def test_trains_scores_and_resumes_after_a_kill(tmp_path, objective, killed):
    run_dir = str(tmp_path / "run")
    args = ["--epochs=3", "--steps_per_epoch=6"]
    seen = []
    if killed:
        seen = kill_at(_start(objective, run_dir, *args), epoch=2, batch=3)
        assert not os.path.exists(os.path.join(run_dir, "results.json"))

    # The run (or the resumed run) in this process: the recipe as a fresh
    # process is the harness's (tests/recipes/test_harness.py).
    code, out = _run_here(objective, run_dir, *args)
    assert code == 0, out[-3000:]
    # Nothing of the corpus is dropped: the log says how it was packed.
    packed = next(line for line in seen + out.splitlines()
                  if line.startswith("Packed"))
    assert "none dropped" in packed
    results = _results(run_dir)
    assert ("Resuming after epoch 1 from" in out) == killed
    assert results["resumed_from_epoch"] == (1 if killed else 0)
    assert results["optimizer_steps"] == 3 * 6
    assert [h["epoch"] for h in results["history"]] == [1, 2, 3]
    heldout = results["heldout"]
    assert heldout["predicted_tokens"] > 0
    assert 0 <= heldout["accuracy"] <= 1
    # Better than a uniform guess over the vocabulary after 18 steps.
    assert heldout["loss"] < np.log(results["vocabulary_size"])
    assert results["tokens_per_second"] > 0
    assert os.path.isfile(os.path.join(run_dir, "preset", "config.json"))
    # The held-out scores are the last epoch's validation scores.
    last = results["history"][-1]
    np.testing.assert_allclose(last["val_token_loss"], heldout["loss"],
                               rtol=1e-4)


def test_glue_fine_tunes_the_pretrained_backbone(tmp_path):
    from keras_synth.models import SynthesizerBackbone
    from keras_synth.models import SynthesizerTextClassifier
    from recipes.glue import model as glue_model

    run_dir = str(tmp_path / "mlm")
    code, out = _run_here("mlm", run_dir, "--epochs=1", "--steps_per_epoch=4")
    assert code == 0, out[-3000:]
    preset = os.path.join(run_dir, "preset")
    pretrained = SynthesizerBackbone.from_preset(preset)
    model, _ = glue_model.build_model(
        vocab_size=pretrained.vocabulary_size, num_classes=2,
        num_segments=1, sequence_length=24, dropout=0.1, preset=preset)
    for a, b in zip(pretrained.weights, model.backbone.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a),
                                      keras.ops.convert_to_numpy(b))
    classifier = SynthesizerTextClassifier.from_preset(preset, num_classes=3)
    assert classifier.predict(["the film is good ."], verbose=0).shape == (
        1, 3)

    # The recipe end to end from the preset, its flags checked against it.
    glue = ["--task=builtin", f"--preset={preset}",
            "--max_train_examples=64", "--batch_size=16", "--epochs=1",
            "--no_export", "--no_tensorboard",
            f"--model_dir={tmp_path / 'glue'}"]
    code, out = run_here("recipes.glue", glue + ["--hidden_dim=32"])
    assert code == 2
    assert "`--hidden_dim=32` contradicts the preset" in out
    code, out = run_here("recipes.glue", glue)
    assert code == 0, out[-3000:]
    assert "from the preset" in out

    # With LoRA (the recipe's default targets: the backbone's and the token
    # embedding): the adapters and the head train, the rest stays the
    # preset's; the run's preset holds the merged weights.
    lora_dir = str(tmp_path / "lora")
    code, out = run_here("recipes.glue", [
        a for a in glue if not a.startswith(("--model_dir", "--no_export"))]
        + ["--lora_rank=4", "--learning_rate=1e-2",
           f"--model_dir={lora_dir}"])
    assert code == 0, out[-3000:]
    assert "(LoRA rank 4 on value, attention_output" in out
    adapted = SynthesizerBackbone.from_preset(preset)
    targets = list(adapted.default_lora_layer_names()) + ["token_embedding"]
    adapted.enable_lora(4, target_layer_names=targets)
    head = pretrained.hidden_dim * 2 + 2
    expected = sum(int(np.prod(w.shape)) for w in adapted.trainable_weights)
    assert _results(lora_dir)["parameters"] == expected + head
    tuned = SynthesizerTextClassifier.from_preset(
        os.path.join(lora_dir, "preset")).backbone
    changed = set()
    for a, b in zip(pretrained.weights, tuned.weights):
        assert a.path == b.path
        if not np.array_equal(keras.ops.convert_to_numpy(a),
                              keras.ops.convert_to_numpy(b)):
            changed.add(a.path.split("/", 1)[-1])
    # The adapted layers' kernels (merged) and biases; nothing else.
    assert changed and all(
        any(f"/{name}/" in f"/{path}"
            for name in targets)
        for path in changed), sorted(changed)
    assert "self_attention_layer/random/logits" in changed  # R + A B
    assert any(p.endswith("token_embedding/embeddings") for p in changed), sorted(changed)


def test_two_workers_pretrain_and_score_alike(tmp_path):
    """`--strategy=multi_worker` for real: two worker processes on
    127.0.0.1 (`tests/recipes/cluster.py`); the held-out set (15 windows:
    a last batch that does not split evenly over the workers) is scored on
    each worker, and both report the same scores."""
    from tests.recipes.cluster import Cluster

    model_dir = str(tmp_path / "run")
    command = ["-m", "recipes.pretrain", "--objective=mlm",
               "--strategy=multi_worker", f"--model_dir={model_dir}",
               *TINY, "--epochs=2", "--steps_per_epoch=5"]
    cluster = Cluster(command, log_dir=str(tmp_path))
    try:
        codes = cluster.wait(420)
    finally:
        cluster.kill()
    outputs = [cluster.output(i) for i in range(2)]
    assert codes == {0: 0, 1: 0}, outputs[0][-3000:] + outputs[1][-3000:]
    results = _results(model_dir)
    assert results["num_replicas"] == 2
    assert results["windows"]["heldout"] % 2 == 1
    held = [line for line in outputs[0].splitlines()
            if line.startswith("Held-out")]
    assert held and held[-1] in outputs[1]
    assert os.path.isfile(os.path.join(model_dir, "preset", "config.json"))


def test_tfds_text_sets_under_mock_data():
    """`--dataset=wiki40b/en` (any tfds set with a `text` feature) reads
    its train split's documents, `--max_train_examples` of them."""
    import tensorflow_datasets as tfds

    from recipes.pretrain import data as data_lib

    with tfds.testing.mock_data(num_examples=6):
        lines = data_lib.read_tfds("wiki40b/en")
        few = data_lib.read_tfds("wiki40b/en", max_examples=2)
    assert len(lines) == 6 and all(line.strip() for line in lines)
    assert len(few) == 2
