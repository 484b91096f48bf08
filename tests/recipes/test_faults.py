"""Training under faults: a non-chief writes nothing, shuffles depend on
the seed and epoch only, a restart after the last backup trains no more.
SIGKILL mid-epoch, then resume with the uninterrupted run's history: every
recipe on every backend, tests/recipes/test_harness.py."""

import json
import os

import keras
import numpy as np
import pytest

from recipes.core import run_directory
from recipes.core import storage
from recipes.core import training



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


# ------------------------------------------- restart after the last backup
# (SIGKILL mid-epoch, then resume, on every recipe and backend: the recipe
# harness, tests/recipes/test_harness.py.)


RECIPE = ["--task=builtin", "--synthesizer=random+vanilla",
          "--max_train_examples=160", "--batch_size=16", "--epochs=2",
          "--max_length=24", "--hidden_dim=16", "--num_heads=2",
          "--num_layers=1", "--vocab_size=200", "--learning_rate=3e-3",
          "--dropout=0", "--verbose=0", "--no_tensorboard", "--no_export"]


def _comparable(history):
    return [{k: v for k, v in h.items() if k != "steps_per_second"}
            for h in history]


def test_a_restart_after_the_last_backup_trains_no_more(tmp_path):
    # Killed after the last backup, before results.json: a restart trains
    # no more and writes the same results.
    from recipes.glue import train as train_lib

    def run():
        return train_lib.run(train_lib.build_parser().parse_args(
            [f"--model_dir={tmp_path}"] + RECIPE), log=lambda *_: None)

    clean = run()
    assert clean["resumed_from_epoch"] == 0
    os.remove(os.path.join(tmp_path, "results.json"))
    again = run()
    assert again["resumed_from_epoch"] == 2
    assert again["optimizer_steps"] == clean["optimizer_steps"] == 2 * 10
    assert _comparable(again["history"]) == _comparable(clean["history"])
    for split, values in clean["metrics"].items():
        for name, value in values.items():
            np.testing.assert_allclose(again["metrics"][split][name], value,
                                       rtol=1e-5, atol=1e-6)
    assert storage.read_json(os.path.join(tmp_path, "results.json"))[
        "resumed_from_epoch"] == 2
    assert sorted(os.listdir(os.path.join(tmp_path, "backup"))) == [
        "LATEST", "epoch-2"]
