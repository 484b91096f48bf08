"""The run directory: one configuration, its checkpoints, history and
results, written atomically so that a killed run never leaves a
half-written file that a restart would load.

The atomic writes and JSON files (`atomic_write`, `write_json`,
`read_json`, `remove_temporary_files`, ...) are `recipes.core.atomic`'s,
importable from here too.
"""

from recipes.core import callbacks
from recipes.core import files
from recipes.core.atomic import TMP_PREFIX
from recipes.core.atomic import atomic_write
from recipes.core.atomic import read_json
from recipes.core.atomic import remove_temporary_files
from recipes.core.atomic import temporary_path
from recipes.core.atomic import write_json
from recipes.core.cluster import is_chief

# Flags that don't change what a run computes: a run directory may be reused
# with different values (e.g. resume a run on another machine).
RUNTIME_FLAGS = frozenset(
    {"model_dir", "strategy", "tpu", "verbose", "tensorboard", "export",
     "jit_compile", "data_dir", "vocab_file", "tfds_data_dir", "tf_logs",
     "cluster_timeout", "steps_per_execution", "distribution",
     "model_parallel", "job_addresses", "num_processes", "process_id"}
)


# TF32 or not (`--matmul_precision`) moves round-off only, as `--jit_compile`.
RUNTIME_FLAGS = RUNTIME_FLAGS | {"matmul_precision"}


class RunDirectory:
    """A run directory: configuration, backup, history, logs and results.

    Layout:
        args.json            the run's arguments (checked on resume)
        vocab.txt            the vocabulary
        backup/              `keras.callbacks.BackupAndRestore`'s backup
                             of the last finished epoch (model, optimizer)
        history.csv          one row of metrics per finished epoch
                             (`keras.callbacks.CSVLogger`)
        logs/                TensorBoard
        results.json         the final results

    A run directory belongs to one configuration: starting it again with
    different arguments (other than `RUNTIME_FLAGS`) raises a ValueError
    naming the differences, instead of mixing two runs.

    In a multi-worker run only the chief writes it (and repairs what a
    killed run left); the other workers read the chief's files (the
    vocabulary, the backup), so every worker must see the same folder.

    `path` may be a local folder or a folder on any file system
    `tf.io.gfile` knows (`gs://bucket/run`): every file goes through
    `recipes.core.files`, whose docstring says how writes stay atomic
    without an atomic rename.

    Args:
        path: the directory (created).
        config: a dict of the run's arguments (`vars(args)`).
        runtime_flags: keys that may differ between starts.
    """

    def __init__(self, path, config, runtime_flags=RUNTIME_FLAGS):
        files.check_filesystem(path, "model_dir")
        self.root = files.abspath(path)
        self.config = dict(config)
        self.runtime_flags = frozenset(runtime_flags)
        self.is_chief = is_chief()
        self.backup_dir = self.path("backup")
        self.history_path = self.path("history.csv")
        self.log_dir = self.path("logs")
        if not self.is_chief:
            return
        files.makedirs(self.root)
        self._check_config()
        # What a killed run was writing when it died is never loaded.
        remove_temporary_files(self.root)

    def path(self, *names):
        return files.join(self.root, *names)

    def _check_config(self):
        saved_path = self.path("args.json")
        if files.isfile(saved_path):
            saved = read_json(saved_path)
            keys = (set(saved) | set(self.config)) - self.runtime_flags
            differences = {
                k: (saved.get(k), self.config.get(k))
                for k in sorted(keys)
                if saved.get(k) != self.config.get(k)
            }
            if differences:
                listing = ", ".join(
                    f"--{k}: {old!r} there, {new!r} now"
                    for k, (old, new) in differences.items()
                )
                raise ValueError(
                    f"The run directory {self.root} holds a run with a "
                    f"different configuration ({listing}). Use another "
                    "--model_dir, or the same arguments to resume it."
                )
        else:
            write_json(saved_path, self.config)

    # ------------------------------------------------------ backup, history

    def resume(self):
        """The number of epochs the backup holds (0 without one): where
        training continues. On the chief, the history keeps one row per
        one of those epochs (a killed run may have logged one more)."""
        epoch = callbacks.backup_epoch(self.backup_dir)
        if self.is_chief:
            callbacks.truncate_history(self.history_path, epoch)
        return epoch

    def callbacks(self, tensorboard=True):
        """The Keras callbacks of the run (`recipes.core.callbacks`): the
        history, TensorBoard and the backup."""
        return callbacks.run_callbacks(self, tensorboard=tensorboard)

    def restore(self, model):
        """Loads the backup into `model` (compiled, built) without
        training, for a run whose epochs are all done; returns its epoch."""
        return callbacks.restore(model, self.backup_dir)

    def history(self):
        """The per-epoch metrics of finished epochs (survives resumes)."""
        return callbacks.read_history(self.history_path)

    def write_results(self, results):
        path = self.path("results.json")
        write_json(path, results)
        return path


__all__ = ["RUNTIME_FLAGS", "RunDirectory", "TMP_PREFIX", "atomic_write",
           "read_json", "remove_temporary_files", "temporary_path",
           "write_json"]
