"""Atomic writes: a file or folder is written at a temporary name next to
its destination, then renamed into place, so that a killed run never leaves
a half-written file that a restart would load; JSON files written so; and
the recovery of what a killed write left behind (`remove_temporary_files`).

On file systems without an atomic rename (`gs://`, `ram://`) the fallback
of `recipes.core.files` applies (see its docstring). Importing this module
imports neither TensorFlow nor Keras.
"""

import json
import os

from recipes.core import files

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
