"""recipes.core.callbacks: the history file has no always-empty columns;
the backup holds the dropout layers' seed states, so that a resumed `fit`
draws the uninterrupted run's masks."""

import csv

import keras
import numpy as np

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
    # Keras' CSVLogger adds val_dev_accuracy and val_loss, always NA here.
    assert rows[0] == ["epoch", "dev_accuracy", "loss"]
    assert [row[:2] for row in rows[1:]] == [["0", "0.5"], ["1", "0.6"]]
    assert not any("NA" in row for row in rows)
    # A resumed run appends rows under the same header.
    fit(run_dir, epochs=3, initial_epoch=2)
    rows = read_rows(run_dir.history_path)
    assert rows[0] == ["epoch", "dev_accuracy", "loss"]
    assert [row[0] for row in rows[1:]] == ["0", "1", "2"]
    assert rows[3][1] == "0.7"
    assert [h["epoch"] for h in run_dir.history()] == [1, 2, 3]


def test_history_keeps_validation_and_an_existing_header(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    fit(run_dir, epochs=1, validation=True)
    rows = read_rows(run_dir.history_path)
    assert rows[0] == ["epoch", "dev_accuracy", "loss", "val_loss"]
    assert "NA" not in rows[1]
    # A file written with other columns (an earlier release's `val_`
    # copies): the appended rows follow its header.
    old = ["epoch", "dev_accuracy", "loss", "val_dev_accuracy", "val_loss"]
    with open(run_dir.history_path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(
            [old, ["0", "0.5", "1.0", "NA", "NA"]])
    fit(run_dir, epochs=2, initial_epoch=1, validation=True)
    rows = read_rows(run_dir.history_path)
    assert rows[0] == old
    assert len(rows[2]) == len(old)
    assert rows[2][:2] == ["1", "0.6"] and rows[2][3] == "NA"
    assert float(rows[2][4]) >= 0  # val_loss under its own column


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
