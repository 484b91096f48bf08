"""Training under faults: SIGKILL mid-epoch, then a restart resumes from
the last complete checkpoint with the uninterrupted run's metrics (the
end-to-end GLUE runs here on TensorFlow; every recipe is killed and resumed
on every backend by the recipe harness)."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from recipes.core import run_directory
from recipes.core import storage
from recipes.core import training

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the GLUE recipe's kill-and-resume details (tf.data shuffles, "
    "logs) on TensorFlow; kill-and-resume on every backend: "
    "tests/recipes/test_jax_processes.py, test_recipes_on_backends.py",
)


def test_a_non_chief_worker_writes_no_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1}}))
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0, epochs=1,
              callbacks=run_dir.callbacks(tensorboard=False))
    assert os.listdir(tmp_path) == []


@tensorflow_only
def test_shuffled_epochs_depend_only_on_seed_and_epoch():
    import tensorflow as tf

    data = tf.data.Dataset.range(10)

    def batches(initial_epoch, seed=0):
        return [b.numpy().tolist() for b in training.shuffled_epochs(
            data, 10, 4, seed, 3, initial_epoch)]

    full = batches(0)
    assert len(full) == 3 * 2  # drop_remainder: 2 batches an epoch
    assert batches(1) == full[2:] and batches(2) == full[4:]
    assert batches(3) == []  # every epoch done
    assert full[:2] != full[2:4]  # each epoch has its own order
    assert batches(0, seed=1) != full
    for epoch in range(3):
        seen = sum(full[2 * epoch:2 * epoch + 2], [])
        assert len(set(seen)) == 8 and set(seen) <= set(range(10))
    with pytest.raises(ValueError, match="initial_epoch=4"):
        training.shuffled_epochs(data, 10, 4, 0, 3, 4)


# ------------------------------------------------------- SIGKILL, resume


RECIPE = ["--task=builtin", "--synthesizer=random+vanilla",
          "--max_train_examples=320", "--batch_size=16", "--epochs=3",
          "--max_length=24", "--hidden_dim=16", "--num_heads=2",
          "--num_layers=1", "--vocab_size=200", "--learning_rate=3e-3",
          # No dropout: a resumed run's dropout masks would differ.
          "--dropout=0", "--verbose=2", "--no_tensorboard", "--no_export"]


def _start(run_dir):
    """Starts the recipe; it prints `batch-end epoch=E batch=B` after every
    training batch (`tests/recipes/progress_run.py`)."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONUNBUFFERED="1",
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recipes.progress_run", "recipes.glue",
         f"--model_dir={run_dir}"] + RECIPE,
        cwd=REPO, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)


def _finish(process, timeout=240):
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out[-2000:]
    return out


def _comparable(history):
    return [{k: v for k, v in h.items() if k != "steps_per_second"}
            for h in history]


@tensorflow_only
def test_sigkill_mid_epoch_resumes_with_the_same_metrics(tmp_path):
    killed_dir = str(tmp_path / "killed")
    clean_dir = str(tmp_path / "clean")
    backup = os.path.join(killed_dir, "backup")

    # 1. Killed after 5 of epoch 2's 20 batches.
    steps = 320 // 16
    process = _start(killed_dir)
    deadline = time.time() + 240
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.strip() == "batch-end epoch=2 batch=5":
                process.send_signal(signal.SIGKILL)
                break
            assert time.time() < deadline, "".join(seen)[-2000:]
        process.wait(timeout=60)
        # What the recipe printed between that line and its death.
        seen.extend(process.stdout.read().splitlines(keepends=True))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, "".join(seen)[-2000:]
    # Every line the recipe printed, to its death: all of epoch 1, then
    # epoch 2 from its first batch to where the kill landed, in the middle
    # of epoch 2 (the recipe may run a batch or two more while the signal
    # is on its way, but not finish the epoch).
    batches = [tuple(int(field.split("=")[1]) for field in line.split()[1:])
               for line in seen if line.startswith("batch-end")]
    done = len(batches) - steps
    assert 5 <= done < steps, "".join(seen)[-2000:]
    assert batches == [(1, b) for b in range(1, steps + 1)] + [
        (2, b) for b in range(1, done + 1)], batches
    # Keras' end-of-epoch line (verbose=2) came for epoch 1 only.
    assert sum(f"{steps}/{steps}" in line for line in seen) == 1, seen
    # Killed in epoch 2 (5 of its batches done), after epoch 1's checkpoint.
    with open(os.path.join(backup, "LATEST")) as f:
        assert f.read() == "epoch-1\n"
    assert sorted(os.listdir(backup)) == ["LATEST", "epoch-1"]
    assert not os.path.exists(os.path.join(killed_dir, "results.json"))

    # 2. Started again with the same arguments; 3. an uninterrupted run.
    resumed = _start(killed_dir)
    out = _finish(resumed)
    assert "Resuming after epoch 1 from" in out
    assert "Epoch 1/3" not in out and "Epoch 2/3" in out
    _finish(_start(clean_dir))

    killed = storage.read_json(os.path.join(killed_dir, "results.json"))
    clean = storage.read_json(os.path.join(clean_dir, "results.json"))
    assert killed["resumed_from_epoch"] == 1
    assert clean["resumed_from_epoch"] == 0
    assert killed["optimizer_steps"] == clean["optimizer_steps"] == 3 * steps
    # No duplicate or missing epoch, in results.json and in history.csv
    # (CSVLogger counts epochs from 0).
    assert [h["epoch"] for h in killed["history"]] == [1, 2, 3]
    with open(os.path.join(killed_dir, "history.csv")) as f:
        assert [line.split(",")[0] for line in f.read().splitlines()] == [
            "epoch", "0", "1", "2"]
    # Same metrics: the resumed epochs see the same batches (a per-epoch
    # shuffle seed) from the same weights and optimizer state. The
    # tolerance only covers float reduction order in TF's CPU kernels.
    a, b = _comparable(killed["history"]), _comparable(clean["history"])
    assert [sorted(h) for h in a] == [sorted(h) for h in b]
    for ha, hb in zip(a, b):
        for key in ha:
            np.testing.assert_allclose(ha[key], hb[key], rtol=1e-4,
                                       atol=1e-5, err_msg=key)
    for split, values in clean["metrics"].items():
        for name, value in values.items():
            np.testing.assert_allclose(killed["metrics"][split][name], value,
                                       rtol=1e-4, atol=1e-5)
    # Killed after the last backup, before results.json: a restart
    # trains no more and writes the same results.
    os.remove(os.path.join(clean_dir, "results.json"))
    from recipes.glue import train as train_lib

    again = train_lib.run(
        train_lib.build_parser().parse_args(
            [f"--model_dir={clean_dir}"] + RECIPE + ["--verbose=0"]),
        log=lambda *_: None)
    assert again["resumed_from_epoch"] == 3
    assert again["optimizer_steps"] == 3 * steps
    assert _comparable(again["history"]) == _comparable(clean["history"])
    np.testing.assert_allclose(again["metrics"]["dev"]["accuracy"],
                               clean["metrics"]["dev"]["accuracy"],
                               atol=1e-6)
    # Nothing temporary is left behind; one checkpoint, the last.
    for root, dirs, files in os.walk(killed_dir):
        assert not [n for n in dirs + files if "tmp" in n], root
    assert sorted(os.listdir(backup)) == ["LATEST", "epoch-3"]
