"""The run directory: one configuration, its checkpoints, history and
results, written atomically so that a killed run never leaves a
half-written file that a restart would load."""

import json
import os

from recipes.core import files
from recipes.core.runtime import is_chief

# Flags that don't change what a run computes: a run directory may be reused
# with different values (e.g. resume a run on another machine).
RUNTIME_FLAGS = frozenset(
    {"model_dir", "strategy", "tpu", "verbose", "tensorboard", "export",
     "jit_compile", "data_dir", "vocab_file", "tfds_data_dir", "tf_logs",
     "cluster_timeout", "steps_per_execution"}
)


# TF32 or not (`--matmul_precision`) moves round-off only, as `--jit_compile`.
RUNTIME_FLAGS = RUNTIME_FLAGS | {"matmul_precision"}


TMP_PREFIX = ".tmp-"


def temporary_path(path):
    """A temporary name for `path` in the same folder (so that renaming it
    to `path` is atomic); it keeps `path`'s ending (e.g. `.weights.h5`)."""
    folder, name = files.split(files.abspath(path))
    return files.join(folder, f"{TMP_PREFIX}{os.getpid()}-{name}")


def atomic_write(path, write):
    """Calls `write(tmp)` to write a file or folder at a temporary name next
    to `path`, then renames it to `path`.

    A process killed (or an exception raised) while writing leaves `path`
    as it was: absent, or the previous complete version. A folder replaces
    the previous folder: the previous one is moved aside (to
    `_old_folder_path(path)`), the new one renamed to `path`, then the
    previous one removed. A process killed between those two renames
    leaves no `path` but a complete new folder, which
    `remove_temporary_files` renames to `path`; it removes every other
    leftover temporary name.

    `write` writes through `recipes.core.files` (or any writer that knows
    the path's file system). On a file system with a scheme (`gs://`,
    `ram://`: no atomic rename), a file is renamed over `path` with
    `tf.io.gfile.rename` and a folder is copied to `path` once a sentinel
    says it is complete (see `recipes.core.files`).
    """
    if not files.is_local(path):
        return _atomic_write_without_rename(path, write)
    import shutil

    tmp = temporary_path(path)
    old = _old_folder_path(path)
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    try:
        write(tmp)
        if os.path.isfile(tmp):
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        if os.path.isdir(tmp) and os.path.isdir(path):
            # From here on `tmp` is complete: a restart keeps it.
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.isdir(old) and not os.path.exists(path):
            os.replace(old, path)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


_OLD_PREFIX = f"{TMP_PREFIX}old-"
# Next to a complete new folder on a file system without atomic renames:
# the new folder is being copied to its destination.
_DONE_PREFIX = f"{TMP_PREFIX}done-"


def _old_folder_path(path):
    """Where `atomic_write` moves the previous folder `path` aside."""
    folder, name = files.split(files.abspath(path))
    return files.join(folder, f"{_OLD_PREFIX}{os.getpid()}-{name}")


def _done_path(path):
    """The sentinel saying that `temporary_path(path)` is complete."""
    folder, name = files.split(files.abspath(path))
    return files.join(folder, f"{_DONE_PREFIX}{os.getpid()}-{name}")


def _atomic_write_without_rename(path, write):
    """`atomic_write` on a file system with a scheme (see
    `recipes.core.files`): a file renamed with `tf.io.gfile.rename`, a
    folder copied once its sentinel is written."""
    tmp, done = temporary_path(path), _done_path(path)
    for leftover in (tmp, done):
        if files.isdir(leftover):
            files.rmtree(leftover)
        elif files.exists(leftover):
            files.remove(leftover)
    try:
        write(tmp)
        if not files.isdir(tmp):
            files.replace(tmp, path)
            return path
        files.write_text(done, "")
    except BaseException:
        if files.isdir(tmp):
            files.rmtree(tmp, ignore_errors=True)
        elif files.exists(tmp):
            files.remove(tmp)
        raise
    # From here on `tmp` is complete: a restart copies it again if killed.
    _copy_complete_folder(tmp, path, done)
    return path


def _copy_complete_folder(new, path, done):
    """Replaces the folder `path` by the complete folder `new`, then deletes
    the sentinel `done` and `new`."""
    if files.isdir(path):
        files.rmtree(path)
    elif files.exists(path):
        files.remove(path)
    files.copytree(new, path)
    files.remove(done)
    files.rmtree(new, ignore_errors=True)


def _recover_replaced_folders(folder):
    """Finishes folder replacements that a kill interrupted between their
    two renames: the previous folder is aside and `name` is missing, so
    the new folder (complete: the previous one is moved aside only once the
    new one is written) becomes `name`, or, if it is gone, the previous
    folder comes back. On a file system without atomic renames, copies
    again the complete new folders whose sentinel is left."""
    for entry in files.listdir(folder):
        if entry.startswith(_DONE_PREFIX):
            pid, sep, name = entry[len(_DONE_PREFIX):].partition("-")
            new = files.join(folder, f"{TMP_PREFIX}{pid}-{name}")
            done = files.join(folder, entry)
            if pid.isdigit() and sep and name and files.isdir(new):
                _copy_complete_folder(new, files.join(folder, name), done)
            continue
        if not entry.startswith(_OLD_PREFIX):
            continue
        pid, sep, name = entry[len(_OLD_PREFIX):].partition("-")
        if not (pid.isdigit() and sep and name):
            continue
        path = files.join(folder, name)
        new = files.join(folder, f"{TMP_PREFIX}{pid}-{name}")
        if files.exists(path):
            continue
        if files.isdir(new):
            files.replace(new, path)
        else:
            files.replace(files.join(folder, entry), path)


def remove_temporary_files(folder):
    """Removes what an interrupted `atomic_write` left in `folder`, after
    completing a folder replacement killed between its two renames (or,
    without atomic renames, while copying a complete new folder)."""
    if not files.isdir(folder):
        return []
    _recover_replaced_folders(folder)
    removed = []
    for name in files.listdir(folder):
        if name.startswith(TMP_PREFIX):
            path = files.join(folder, name)
            if files.isdir(path):
                files.rmtree(path, ignore_errors=True)
            else:
                files.remove(path)
            removed.append(path)
    return removed


def write_json(path, data):
    """Writes `data` as indented JSON, atomically (tmp file + rename)."""
    def write(tmp):
        with files.open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")

    atomic_write(path, write)


def read_json(path):
    with files.open(path, encoding="utf-8") as f:
        return json.load(f)


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
        from recipes.core import callbacks

        epoch = callbacks.backup_epoch(self.backup_dir)
        if self.is_chief:
            callbacks.truncate_history(self.history_path, epoch)
        return epoch

    def callbacks(self, tensorboard=True):
        """The Keras callbacks of the run (`recipes.core.callbacks`): the
        history, TensorBoard and the backup."""
        from recipes.core import callbacks

        return callbacks.run_callbacks(self, tensorboard=tensorboard)

    def restore(self, model):
        """Loads the backup into `model` (compiled, built) without
        training, for a run whose epochs are all done; returns its epoch."""
        from recipes.core import callbacks

        return callbacks.restore(model, self.backup_dir)

    def history(self):
        """The per-epoch metrics of finished epochs (survives resumes)."""
        from recipes.core import callbacks

        return callbacks.read_history(self.history_path)

    def write_results(self, results):
        path = self.path("results.json")
        write_json(path, results)
        return path
