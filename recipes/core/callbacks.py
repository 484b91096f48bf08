"""The Keras callbacks a recipe trains with, and what they leave in the run
directory.

Keras does the work: `keras.callbacks.BackupAndRestore` backs up the model
and optimizer at every epoch end and resumes a restarted `fit` (also under
`MultiWorkerMirroredStrategy`), `keras.callbacks.CSVLogger` keeps one row
of metrics per epoch, `keras.callbacks.TensorBoard` the logs. What is added
here is what they do not do:

- only the chief writes (a non-chief worker runs the same callbacks'
  hooks, writes nothing, and restores from the chief's backup, so
  `--model_dir` must be a folder every worker sees);
- the backup folder is replaced atomically: a process killed while
  writing it leaves the previous complete backup (the weights and the epoch
  they belong to never disagree), never a half-written one;
- the history of a resumed run keeps exactly one row per backed-up epoch;
- the backup also holds the model's `SeedGenerator` states (dropout's),
  which Keras' weights files leave out, and on PyTorch every epoch's
  first step seeds the global generator from the run's seed and the epoch
  (`reseed_torch`): the resumed run draws the same dropout masks as an
  uninterrupted one.

Importing this module needs no TensorFlow: the callbacks are built when
`run_callbacks` is called.
"""

import contextlib
import csv
import json
import re

from recipes.core import files
from recipes.core import processes
from recipes.core.atomic import atomic_write

# The names Keras' BackupAndRestore reads in its backup folder.
_BACKUP_WEIGHTS = "latest.weights.h5"
_BACKUP_METADATA = "training_metadata.json"
# Added here: the model's random-seed states (Keras' weights files hold
# none), so that a resumed run draws the dropout masks of an
# uninterrupted one.
_BACKUP_SEEDS = "seed_states.json"
# What CSVLogger writes for a metric an epoch did not log.
_MISSING = "NA"


def backup_epoch(backup_dir):
    """The number of finished epochs in the backup at `backup_dir` (0 when
    there is none): where a restarted `fit` continues."""
    path = files.join(backup_dir, _BACKUP_METADATA)
    if not files.isfile(path):
        return 0
    with files.open(path, encoding="utf-8") as f:
        return int(json.load(f)["epoch"])


def _seed_variables(model):
    """The model's `SeedGenerator` states, in order: what
    `model.variables` holds beyond `model.weights`."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def seed_states(model):
    """`{"paths": [...], "states": [[int, int], ...]}`: the current state
    of every `SeedGenerator` of `model` (each a dropout layer's; Keras'
    weights files hold none), in `model.variables`' order."""
    import keras

    variables = _seed_variables(model)
    return {"paths": [v.path for v in variables],
            "states": [keras.ops.convert_to_numpy(v.value).tolist()
                       for v in variables]}


def reseed_torch(base_seed, epoch):
    """Seeds PyTorch's global generators for `epoch` from `base_seed`.

    Keras' PyTorch dropout draws an unseeded layer's masks from the global
    generator, which more than training advances (a PyTorch data loader
    draws a seed for every iterator: an evaluation's `predict`, a resumed
    run's new iterator); seeded at every epoch's first step from
    `(base_seed, epoch)`, an epoch draws the same masks in a resumed run
    as in an uninterrupted one."""
    import torch

    torch.manual_seed((base_seed * 1_000_003 + epoch) % (2 ** 63))


def _structure(paths):
    """The paths without Keras' uniquifying suffixes (`seed_generator_4`
    -> `seed_generator`): a model built again in the same process has the
    same structure under other numbers."""
    return [re.sub(r"_\d+(?=/|$)", "", path) for path in paths]


def restore_seed_states(model, saved):
    """Assigns `saved` (`seed_states` of a model built the same way) to
    `model`'s `SeedGenerator`s, in order.

    Raises:
        ValueError: the paths differ (another model).
    """
    import numpy as np

    variables = _seed_variables(model)
    paths = [v.path for v in variables]
    if _structure(paths) != _structure(saved["paths"]):
        raise ValueError(
            "The backup's seed states belong to another model: its "
            f"SeedGenerators are {saved['paths']}, this model's {paths}.")
    for v, state in zip(variables, saved["states"]):
        v.assign(np.asarray(state, dtype=v.dtype))


def _make_backup_class():
    import keras

    class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
        """`keras.callbacks.BackupAndRestore`, written by the chief only,
        one folder replaced atomically at every epoch end.

        Kept after training (`delete_checkpoint=False`): a run killed
        after its last epoch but before its results restarts without
        training and finds the final weights.
        """

        def __init__(self, backup_dir, chief=True):
            super().__init__(backup_dir, save_freq="epoch",
                             delete_checkpoint=False)
            self.chief = chief

        def on_epoch_end(self, epoch, logs=None):
            if not self.chief:
                return

            def write(tmp):
                files.makedirs(tmp, exist_ok=False)
                # Keras writes remote weights through a local file; the
                # chief alone (several JAX processes: outside the
                # distribution, whose variables JAX checks with the others).
                with processes.without_distribution():
                    self.model.save_weights(files.join(tmp, _BACKUP_WEIGHTS))
                with files.open(files.join(tmp, _BACKUP_METADATA), "w",
                                encoding="utf-8") as f:
                    json.dump({"epoch": epoch + 1, "batch": 0}, f)
                with files.open(files.join(tmp, _BACKUP_SEEDS), "w",
                                encoding="utf-8") as f:
                    json.dump(seed_states(self.model), f)

            atomic_write(self.backup_dir, write)

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)  # Keras loads the weights
            path = files.join(self.backup_dir, _BACKUP_SEEDS)
            if files.isfile(path):
                with files.open(path, encoding="utf-8") as f:
                    restore_seed_states(self.model, json.load(f))
            self.torch_seed = self.reseed_epoch = None
            if keras.backend.backend() == "torch":
                import torch

                # The run's seed (`keras.utils.set_random_seed`), read
                # before the first reseeding.
                self.torch_seed = torch.initial_seed()

        def on_epoch_begin(self, epoch, logs=None):
            super().on_epoch_begin(epoch, logs)
            self.reseed_epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            # At the first step, once the epoch's data iterator exists (a
            # resumed run creates one where an uninterrupted one goes on).
            if self.torch_seed is not None and self.reseed_epoch is not None:
                reseed_torch(self.torch_seed, self.reseed_epoch)
                self.reseed_epoch = None

    return AtomicBackupAndRestore


def _make_history_class():
    import keras

    class HistoryLogger(keras.callbacks.CSVLogger):
        """`keras.callbacks.CSVLogger`, also on a path with a scheme
        (`gs://`): Keras opens it with `tf.io.gfile.GFile`, which has no
        `closed` attribute for CSVLogger's `on_train_begin` and
        `on_train_end` to read; here such a file is closed and forgotten
        first.

        Its columns are what the first epoch logged (or, appending to a
        resumed run's file, that file's header): Keras adds a `val_` copy
        of every column when the first epoch has no `val_` metric (for
        `validation_freq` > 1, which the recipes do not use), columns that
        stay `NA` in a run without `validation_data` (the GLUE recipe
        evaluates in a callback: `dev_accuracy`).
        """

        def _existing_header(self):
            if not (self.append and files.isfile(self.filename)):
                return None
            header, _ = _complete_rows(self.filename)
            return header

        def on_epoch_end(self, epoch, logs=None):
            if self.keys is None:
                self.keys = ([key for key in self._header if key != "epoch"]
                             if self._header else sorted(logs or {}))
            super().on_epoch_end(epoch, logs)

        def _close_remote_file(self):
            if self.csv_file is not None and not files.is_local(
                    self.filename):
                self.csv_file.close()
                self.csv_file = None

        def on_train_begin(self, logs=None):
            self._close_remote_file()
            self._header = self._existing_header()  # before Keras opens it
            super().on_train_begin(logs)

        def on_train_end(self, logs=None):
            self._close_remote_file()
            super().on_train_end(logs)

    return HistoryLogger


def backup_and_restore(backup_dir, chief=True):
    """A `keras.callbacks.BackupAndRestore` saving at every epoch end into
    `backup_dir` (replaced atomically, by the chief only) and resuming a
    restarted `fit` from it."""
    return _make_backup_class()(backup_dir, chief=chief)


def restore(model, backup_dir):
    """Loads the backup at `backup_dir` into `model` (compiled, built)
    without training, e.g. for a run whose epochs are all done, restarted
    before it wrote its results; returns the backup's epoch (0: none,
    nothing loaded)."""
    callback = backup_and_restore(backup_dir, chief=False)
    callback.set_model(model)
    # Where `fit` restores it (tf.distribute; Keras' own on JAX, PyTorch).
    strategy = getattr(model, "distribute_strategy", None)
    with strategy.scope() if strategy else contextlib.nullcontext():
        callback.on_train_begin()
    return backup_epoch(backup_dir)


def _complete_rows(path):
    """The header and the complete rows (as written, as numbers) of the
    `CSVLogger` file at `path` (a row without its line end, or with a
    field that is not a number, was cut short by a kill); None stands for
    a value the epoch did not have."""
    with files.open(path, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    rows = list(csv.reader(lines))
    if not rows:
        return None, []
    header, complete = rows[0], []
    for row in rows[1:]:
        try:
            if len(row) == len(header):
                complete.append((row, [
                    None if value == _MISSING else float(value)
                    for value in row]))
        except ValueError:
            continue
    return header, complete


def read_history(path):
    """The rows of a `CSVLogger` file as dicts of floats with `epoch`
    counted from 1; a half-written last row is left out."""
    if not files.isfile(path):
        return []
    header, rows = _complete_rows(path)
    history = []
    for _, values in rows:
        record = {key: value for key, value in zip(header, values)
                  if value is not None}
        record["epoch"] = int(record["epoch"]) + 1
        history.append(record)
    return history


def truncate_history(path, epochs):
    """Keeps one row per epoch `1 .. epochs` (the backed-up ones) in the
    `CSVLogger` file at `path`, rewritten atomically: a run killed after
    logging an epoch but before backing it up repeats that epoch, whose
    row must not appear twice."""
    if not files.isfile(path):
        return
    header, rows = _complete_rows(path)
    if header is None:
        return
    kept = {}
    for row, values in rows:
        epoch = int(values[header.index("epoch")])
        if epoch < epochs:
            kept[epoch] = row

    def write(tmp):
        with files.open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(kept[k] for k in sorted(kept))

    atomic_write(path, write)


def run_callbacks(run_dir, tensorboard=True):
    """The callbacks every recipe trains with, in this order (put callbacks
    that add to an epoch's logs before them): `CSVLogger` into
    `run_dir.history_path`, TensorBoard into `run_dir.log_dir` unless
    `tensorboard` is False (both on the chief only), and the backup
    (`run_dir.backup_dir`), last so that a backed-up epoch is always in
    the history."""
    import keras

    callbacks = []
    if run_dir.is_chief:
        callbacks.append(_make_history_class()(run_dir.history_path,
                                               append=True))
        if tensorboard:
            callbacks.append(keras.callbacks.TensorBoard(run_dir.log_dir))
    callbacks.append(backup_and_restore(run_dir.backup_dir,
                                        chief=run_dir.is_chief))
    return callbacks
