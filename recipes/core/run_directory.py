"""The run directory: a run's configuration, versioned checkpoints, history
and results, on a local disk or on any file system `tf.io.gfile` knows
(`gs://bucket/run`).

Layout:
    args.json             the run's arguments (checked on resume)
    vocab.txt, ...        what the recipe prepares (its vocabulary)
    backup/epoch-N/       the checkpoint after epoch N: `model.weights.h5`
                          (model and optimizer), `seeds.json` (the
                          dropout layers' seed states) and `history.json`
                          (one row of metrics per epoch 1 .. N)
    backup/LATEST         one line, `epoch-N`: the checkpoint a restart
                          resumes from
    history.csv           the latest checkpoint's history, as Keras'
                          CSVLogger writes it
    logs/                 TensorBoard
    results.json          the final results

A checkpoint is written whole before `LATEST` names it, and `LATEST` is
replaced by one rename of a file written next to it (on an object store
an object is replaced whole): a run killed at any moment leaves `LATEST`
naming a complete checkpoint. A half-written `epoch-N/` is never read and
is written again when epoch N ends again; the checkpoints before the one
`LATEST` names are deleted. Nothing is rewritten in place.

Only the chief writes (`cluster.is_chief`); every worker reads the chief's
checkpoint, so `--model_dir` must be a folder every worker sees.

Runs written by keras-synth 0.1 (`backup/latest.weights.h5` and
`backup/training_metadata.json`, no `LATEST`) resume too.

Importing this module imports neither TensorFlow nor Keras.
"""

import contextlib
import csv
import io
import os
import re

from recipes.core import callbacks
from recipes.core.cluster import is_chief
from recipes.core.storage import check_filesystem
from recipes.core.storage import gfile
from recipes.core.storage import is_local
from recipes.core.storage import join
from recipes.core.storage import read_json
from recipes.core.storage import read_text
from recipes.core.storage import write_file
from recipes.core.storage import write_json

# Flags that don't change what a run computes: a run directory may be reused
# with different values (e.g. resume a run on another machine).
RUNTIME_FLAGS = frozenset(
    {"model_dir", "strategy", "tpu", "verbose", "tensorboard", "export",
     "jit_compile", "data_dir", "vocab_file", "tfds_data_dir", "tf_logs",
     "cluster_timeout", "steps_per_execution", "distribution",
     "model_parallel", "job_addresses", "num_processes", "process_id",
     "matmul_precision"}
)

_CHECKPOINT = re.compile(r"^epoch-(\d+)$")
LATEST = "LATEST"
WEIGHTS = "model.weights.h5"
SEEDS = "seeds.json"
HISTORY = "history.json"


# ---------------------------------------------------------- run directory


class RunDirectory:
    """A run directory: configuration, checkpoints, history and results
    (the layout is the module's docstring).

    A run directory belongs to one configuration: starting it again with
    different arguments (other than `runtime_flags`) raises a ValueError
    naming the differences, instead of mixing two runs.

    Args:
        path: the directory (created), local or `scheme://...`.
        config: a dict of the run's arguments (`vars(args)`).
        runtime_flags: keys that may differ between starts.
        added_flags: `{key: value}` of flags added after runs may have
            started: a saved configuration without `key` is read as
            holding `value` (its behaviour before the flag existed), so
            that such a run resumes. Defaults to none.
    """

    def __init__(self, path, config, runtime_flags=RUNTIME_FLAGS,
                 added_flags=None):
        check_filesystem(path, "model_dir")
        self.root = (os.path.abspath(path) if is_local(path)
                     else path.rstrip("/"))
        self.config = dict(config)
        self.runtime_flags = frozenset(runtime_flags)
        self.added_flags = dict(added_flags or {})
        self.is_chief = is_chief()
        self.backup_dir = self.path("backup")
        self.history_path = self.path("history.csv")
        self.log_dir = self.path("logs")
        if self.is_chief:
            gfile().makedirs(self.root)
            self._check_config()

    def path(self, *names):
        return join(self.root, *names)

    def _check_config(self):
        saved_path = self.path("args.json")
        if not gfile().exists(saved_path):
            write_json(saved_path, self.config)
            return
        saved = dict(self.added_flags, **read_json(saved_path))
        keys = (set(saved) | set(self.config)) - self.runtime_flags
        differences = ", ".join(
            f"--{k}: {saved.get(k)!r} there, {self.config.get(k)!r} now"
            for k in sorted(keys) if saved.get(k) != self.config.get(k))
        if differences:
            raise ValueError(
                f"The run directory {self.root} holds a run with a "
                f"different configuration ({differences}). Use another "
                "--model_dir, or the same arguments to resume it.")

    # ----------------------------------------------------------- checkpoints

    def checkpoint_path(self, epoch):
        return join(self.backup_dir, f"epoch-{epoch}")

    def resume(self):
        """The number of epochs the latest checkpoint holds (0 without
        one): where training continues."""
        latest = join(self.backup_dir, LATEST)
        if gfile().exists(latest):
            # Read twice at most: the chief names a new checkpoint in
            # LATEST before it deletes the old one, so another worker that
            # read the old name just before finds the new one on reading
            # again. A name that stays wrong was changed by hand.
            for _ in range(2):
                name = read_text(latest).strip()
                match = _CHECKPOINT.match(name)
                if match and gfile().exists(
                        join(self.backup_dir, name, WEIGHTS)):
                    return int(match.group(1))
            raise ValueError(
                f"{latest} names {name!r}, expected `epoch-N` with a "
                f"checkpoint {join(self.backup_dir, name, WEIGHTS)}; "
                "the run directory was changed by hand. Use another "
                "--model_dir, or remove its backup to start again.")
        legacy = join(self.backup_dir, "training_metadata.json")
        return int(read_json(legacy)["epoch"]) if gfile().exists(legacy) else 0

    def save_checkpoint(self, model, epoch, history):
        """Writes the checkpoint after `epoch` (1-based) with the rows of
        `history` (epochs 1 .. `epoch`), then names it in `LATEST` and
        deletes the older checkpoints. Chief only: elsewhere nothing."""
        if not self.is_chief:
            return
        folder = self.checkpoint_path(epoch)
        if gfile().exists(folder):  # a killed run's, never named in LATEST
            gfile().rmtree(folder)
        gfile().makedirs(folder)
        callbacks.save_weights(model, join(folder, WEIGHTS))
        write_json(join(folder, SEEDS), callbacks.seed_states(model))
        write_json(join(folder, HISTORY), history)
        write_file(join(self.backup_dir, LATEST), f"epoch-{epoch}\n")
        write_file(self.history_path, _csv(history))
        for name in gfile().listdir(self.backup_dir):
            match = _CHECKPOINT.match(name.rstrip("/"))
            if match and int(match.group(1)) < epoch:
                gfile().rmtree(join(self.backup_dir, name.rstrip("/")))

    def load_checkpoint(self, model):
        """Loads the latest checkpoint into `model` (built, compiled):
        weights, optimizer and seed states; returns its epoch (0: none,
        nothing loaded)."""
        epoch = self.resume()
        if not epoch:
            return 0
        if gfile().exists(join(self.backup_dir, LATEST)):
            folder = self.checkpoint_path(epoch)
            weights, seeds = join(folder, WEIGHTS), join(folder, SEEDS)
        else:  # keras-synth 0.1's layout
            weights = join(self.backup_dir, "latest.weights.h5")
            seeds = join(self.backup_dir, "seed_states.json")
        callbacks.load_weights(model, weights)
        if gfile().exists(seeds):
            callbacks.restore_seed_states(model, read_json(seeds))
        return epoch

    def restore(self, model):
        """`load_checkpoint` outside `fit` (a run whose epochs are all
        done), under the model's strategy."""
        strategy = getattr(model, "distribute_strategy", None)
        with strategy.scope() if strategy else contextlib.nullcontext():
            return self.load_checkpoint(model)

    def history(self):
        """The rows (dicts, `epoch` from 1) of the latest checkpoint's
        epochs."""
        for attempt in range(2):
            epoch = self.resume()
            if not epoch:
                return []
            if not gfile().exists(join(self.backup_dir, LATEST)):
                return _legacy_history(self.history_path, epoch)
            path = join(self.checkpoint_path(epoch), HISTORY)
            # Another worker's read: the chief may delete this checkpoint
            # (a newer one named) between `resume` and here.
            if attempt or gfile().exists(path):
                return read_json(path)

    def callbacks(self, tensorboard=True):
        """The Keras callbacks of the run: TensorBoard into `log_dir`
        (chief only; not with `tensorboard=False`) and the checkpoint,
        last so that it records the logs the others added."""
        return callbacks.run_callbacks(self, tensorboard=tensorboard)

    def write_results(self, results):
        return write_json(self.path("results.json"), results)


def _csv(history):
    """The rows as Keras' CSVLogger writes them: `epoch` (from 0), then
    every metric (sorted)."""
    keys = sorted({k for row in history for k in row} - {"epoch"})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["epoch", *keys])
    for row in history:
        writer.writerow([row["epoch"] - 1, *(row.get(k, "NA") for k in keys)])
    return out.getvalue()


def _legacy_history(path, epochs):
    """The rows of epochs 1 .. `epochs` of keras-synth 0.1's `history.csv`
    (Keras' CSVLogger: `epoch` from 0, `NA` for a missing value)."""
    if not gfile().exists(path):
        return []
    rows = {}
    for row in csv.DictReader(io.StringIO(read_text(path))):
        try:
            record = {k: float(v) for k, v in row.items() if v != "NA"}
        except (TypeError, ValueError):
            continue  # a row a kill cut short
        epoch = int(record.pop("epoch")) + 1
        if epoch <= epochs:
            rows[epoch] = {"epoch": epoch, **record}
    return [rows[e] for e in sorted(rows)]


__all__ = ["RUNTIME_FLAGS", "RunDirectory"]
