"""recipes.core.callbacks and the run directory's checkpoints: versioned
(`backup/epoch-N/`, `LATEST`), never read half-written, the history has
no always-empty columns, runs of the first release resume; the checkpoint holds the dropout layers' seed states, so that a resumed `fit`
draws the uninterrupted run's masks."""

import csv
import json
import os

import keras
import numpy as np
import pytest

from recipes.core import callbacks
from recipes.core import run_directory


class DevMetric(keras.callbacks.Callback):
    """Adds `dev_accuracy` to each epoch's logs, as the GLUE recipe's
    evaluation callback does."""

    def on_epoch_end(self, epoch, logs=None):
        logs["dev_accuracy"] = 0.5 + epoch / 10


def fit(run_dir, epochs, initial_epoch=0, validation=False):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 3), "float32")
    y = np.zeros((8, 1), "float32")
    model.fit(x, y, batch_size=4, epochs=epochs, initial_epoch=initial_epoch,
              verbose=0, validation_data=(x, y) if validation else None,
              callbacks=[DevMetric()] + callbacks.run_callbacks(
                  run_dir, tensorboard=False))


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_history_has_the_logged_columns_only(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    fit(run_dir, epochs=2)
    rows = read_rows(run_dir.history_path)
    # As Keras' CSVLogger writes it (epoch from 0), without its always-NA
    # val_ copies.
    assert rows[0] == ["epoch", "dev_accuracy", "loss"]
    assert [row[:2] for row in rows[1:]] == [["0", "0.5"], ["1", "0.6"]]
    assert not any("NA" in row for row in rows)
    # A resumed run goes on after epoch 2 with the same columns.
    fit(run_dir, epochs=3)
    rows = read_rows(run_dir.history_path)
    assert rows[0] == ["epoch", "dev_accuracy", "loss"]
    assert [row[0] for row in rows[1:]] == ["0", "1", "2"]
    assert rows[3][1] == "0.7"
    assert [h["epoch"] for h in run_dir.history()] == [1, 2, 3]
    assert [h["dev_accuracy"] for h in run_dir.history()] == pytest.approx(
        [0.5, 0.6, 0.7])


def test_history_keeps_validation_columns(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    fit(run_dir, epochs=1, validation=True)
    rows = read_rows(run_dir.history_path)
    assert rows[0] == ["epoch", "dev_accuracy", "loss", "val_loss"]
    assert "NA" not in rows[1] and float(rows[1][3]) >= 0


def weights_of(path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    run_directory.RunDirectory(path, {"a": 1}).restore(model)
    return model.get_weights()


def test_checkpoints_are_versioned_and_latest_names_the_last(tmp_path):
    root = tmp_path / "run"
    run_dir = run_directory.RunDirectory(str(root), {"a": 1})
    fit(run_dir, epochs=3)
    backup = root / "backup"
    assert sorted(os.listdir(backup)) == ["LATEST", "epoch-3"]
    assert (backup / "LATEST").read_text() == "epoch-3\n"
    assert sorted(os.listdir(backup / "epoch-3")) == [
        "history.json", "model.weights.h5", "seeds.json"]
    assert [r["epoch"] for r in json.loads(
        (backup / "epoch-3" / "history.json").read_text())] == [1, 2, 3]
    assert run_dir.resume() == 3
    assert not [n for n in os.listdir(root) if "tmp" in n]


def test_a_checkpoint_killed_while_written_is_never_read(tmp_path,
                                                         monkeypatch):
    root = tmp_path / "run"
    run_dir = run_directory.RunDirectory(str(root), {"a": 1})
    fit(run_dir, epochs=1)
    after_one = weights_of(str(root))

    # Epoch 2's checkpoint dies half-written (its weights file cut short).
    def dies(model, path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(callbacks, "save_weights", dies)
    with pytest.raises(KeyboardInterrupt):
        fit(run_dir, epochs=2)
    monkeypatch.undo()
    assert (root / "backup" / "LATEST").read_text() == "epoch-1\n"
    assert run_dir.resume() == 1 and len(run_dir.history()) == 1
    for got, want in zip(weights_of(str(root)), after_one):
        np.testing.assert_array_equal(got, want)
    # The restart writes epoch 2 again, over the half-written folder.
    fit(run_dir, epochs=2)
    assert sorted(os.listdir(root / "backup")) == ["LATEST", "epoch-2"]
    assert run_dir.resume() == 2


def test_a_latest_naming_no_checkpoint_is_a_clear_error(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    fit(run_dir, epochs=1)
    (tmp_path / "run" / "backup" / "LATEST").write_text("epoch-7\n")
    with pytest.raises(ValueError, match="names 'epoch-7'.*checkpoint"):
        run_dir.resume()


def test_a_run_of_the_first_release_resumes(tmp_path):
    # keras-synth 0.1's layout: Keras' BackupAndRestore files, a seed
    # state file and CSVLogger's history (a row of an epoch not backed up).
    root = tmp_path / "run"
    run_dir = run_directory.RunDirectory(str(root), {"a": 1})
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.optimizer.build(model.trainable_variables)
    (root / "backup").mkdir()
    model.save_weights(str(root / "backup" / "latest.weights.h5"))
    (root / "backup" / "training_metadata.json").write_text(
        '{"epoch": 2, "batch": 0}')
    (root / "history.csv").write_text(
        "epoch,loss,val_loss\n0,1.5,NA\n1,1.25,NA\n2,1.0,NA\n")
    assert run_dir.resume() == 2
    assert run_dir.history() == [{"epoch": 1, "loss": 1.5},
                                 {"epoch": 2, "loss": 1.25}]
    for got, want in zip(weights_of(str(root)), model.get_weights()):
        np.testing.assert_array_equal(got, want)
    fit(run_dir, epochs=3)  # goes on in the new layout
    assert run_dir.resume() == 3
    assert [h["epoch"] for h in run_dir.history()] == [1, 2, 3]
    assert run_dir.history()[1]["loss"] == 1.25


def dropout_model(seeded=False):
    """Two dropout layers; `seeded`: with their own seeds (a
    `SeedGenerator` on every backend; unseeded, Keras' PyTorch dropout
    draws from torch's global generator)."""
    keras.utils.set_random_seed(0)
    seeds = (1, 2) if seeded else (None, None)
    inputs = keras.Input((16,))
    hidden = keras.layers.Dropout(0.5, seed=seeds[0])(
        keras.layers.Dense(16)(inputs))
    model = keras.Model(inputs, keras.layers.Dropout(0.5, seed=seeds[1])(
        hidden))
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_seed_states_restore_the_dropout_masks():
    x = np.ones((4, 16), "float32")
    model = dropout_model(seeded=True)
    model(x, training=True)  # advances the seeds
    saved = callbacks.seed_states(model)
    assert len(saved["paths"]) == 2 and len(saved["states"]) == 2
    want = keras.ops.convert_to_numpy(model(x, training=True))

    other = dropout_model(seeded=True)  # fresh seed states: other masks
    other.set_weights(model.get_weights())
    assert not np.array_equal(
        keras.ops.convert_to_numpy(other(x, training=True)), want)
    other = dropout_model(seeded=True)
    other.set_weights(model.get_weights())
    callbacks.restore_seed_states(other, saved)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(other(x, training=True)), want)


def test_seed_states_of_another_model_are_refused():
    import pytest

    saved = callbacks.seed_states(dropout_model())
    saved["paths"] = saved["paths"][:1]
    saved["states"] = saved["states"][:1]
    with pytest.raises(ValueError, match="belong to another model"):
        callbacks.restore_seed_states(dropout_model(), saved)


def test_a_resumed_fit_draws_the_uninterrupted_dropout_masks(tmp_path):
    def fit_dropout(run_dir, epochs):
        model = dropout_model()
        x = np.ones((8, 16), "float32")
        history = model.fit(
            x, np.zeros((8, 16), "float32"), batch_size=4, epochs=epochs,
            verbose=0, shuffle=False,
            callbacks=callbacks.run_callbacks(run_dir, tensorboard=False))
        return history.history["loss"]

    straight = fit_dropout(run_directory.RunDirectory(
        str(tmp_path / "straight"), {"a": 1}), 3)
    resumed_dir = run_directory.RunDirectory(str(tmp_path / "resumed"),
                                             {"a": 1})
    fit_dropout(resumed_dir, 1)
    # Started again with 3 epochs: resumes after epoch 1 from the backup.
    resumed = fit_dropout(resumed_dir, 3)
    np.testing.assert_allclose(resumed, straight[1:], rtol=1e-6)
