"""recipes.core.callbacks: the history file has no always-empty columns."""

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
