"""Every file operation of the recipes, on local folders and on buckets.

A path is *local* unless it starts with a scheme (`gs://bucket/run`,
`ram://run`, `s3://...`, `file:///...`; any `scheme://`). Local paths go
through Python (`os`, `open`, `shutil`, `gzip`) exactly as before; a path
with a scheme goes through `tf.io.gfile`, which knows the file systems
TensorFlow has registered (`gs://` for Google Cloud Storage, `ram://`, and
those added by plug-ins). TensorFlow is imported only when a path with a
scheme is met: importing this module, or using it on local paths, imports
neither TensorFlow nor Keras.

Atomic replacement. On a local disk `recipes.core.atomic`'s
`atomic_write` writes a file or folder at a temporary name next to its
destination and renames it into place (`os.replace`, atomic on POSIX).
Object stores have no atomic rename: `tf.io.gfile.rename` on `gs://` is a
copy followed by a delete, and `ram://` renames a folder's name but not its
contents. There the fallback is:

- a file is written at its temporary name, then renamed over the
  destination with `tf.io.gfile.rename(..., overwrite=True)`: on `gs://`
  the copy replaces the destination object whole (an object is never
  visible half-written), and a kill before the delete only leaves the
  temporary name, which the restart removes;
- a folder is written at its temporary name, then a `.tmp-done-` sentinel
  file is written next to it (from then on the new folder is complete),
  the previous folder is deleted and the new one copied file by file to
  the destination, then the sentinel and the temporary folder are deleted.
  A kill before the sentinel leaves the previous folder (the incomplete new
  one is removed at the restart); a kill after it leaves the sentinel, and
  the restart (`atomic.remove_temporary_files`, called when the run
  directory is opened) copies the complete new folder again before
  anything reads it.

Writers that only write local files (keras-hub's `save_to_preset`, matplotlib
through a file name) are run on a local temporary folder whose contents are
then copied to the destination (`write_locally`).
"""

import builtins
import gzip
import io
import os
import posixpath
import re
import shutil
import tempfile

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme(path):
    """The scheme of `path` (`"gs"` for `gs://bucket/x`), None if local."""
    match = _SCHEME.match(os.fspath(path))
    return match.group(1) if match else None


def is_local(path):
    """Whether `path` is a local path (no `scheme://` prefix)."""
    return scheme(path) is None


def _gfile():
    try:
        import tensorflow as tf
    except ImportError as error:  # pragma: no cover - TF is a dependency
        raise ValueError(
            "Paths with a scheme (gs://, ram://, ...) are read and written "
            "with TensorFlow's tf.io.gfile; install tensorflow."
        ) from error
    return tf.io.gfile


def check_filesystem(path, flag=None):
    """Raises a ValueError if `path` has a scheme that `tf.io.gfile` does not
    know (e.g. `gcs://` for `gs://`); names `--flag` when given. A local
    path is always accepted (and TensorFlow not imported)."""
    name = scheme(path)
    if name is None:
        return path
    gfile = _gfile()
    import tensorflow as tf

    try:
        gfile.exists(path)
    except tf.errors.UnimplementedError:
        known = sorted(s for s in gfile.get_registered_schemes() if s)
        where = f"Argument `--{flag}`: the" if flag else "The"
        raise ValueError(
            f"{where} file system {name}:// of {path!r} is not known to "
            f"tf.io.gfile; expected a local path or one of "
            f"{', '.join(s + '://' for s in known)}."
            + (f" Received: --{flag}={path}" if flag else "")
        ) from None
    return path


# ------------------------------------------------------------------- names


def join(path, *names):
    """`os.path.join`, keeping a `scheme://` prefix intact."""
    if is_local(path):
        return os.path.join(path, *names)
    return posixpath.join(path, *names)


def abspath(path):
    """`os.path.abspath` of a local path; a path with a scheme unchanged
    (without a trailing `/`): `os.path.abspath("gs://b/run")` would make it
    a local folder named `gs:`."""
    if is_local(path):
        return os.path.abspath(path)
    prefix = _SCHEME.match(path).group(0)
    rest = path[len(prefix):]
    return prefix + (posixpath.normpath(rest) if rest.strip("/") else
                     rest).rstrip("/")


def split(path):
    """`(folder, name)` of `path` (`os.path.split`; a scheme kept)."""
    if is_local(path):
        return os.path.split(path)
    return posixpath.split(path)


def dirname(path):
    return split(path)[0]


def basename(path):
    return split(path)[1]


# ----------------------------------------------------------------- queries


def exists(path):
    if is_local(path):
        return os.path.exists(path)
    return _gfile().exists(path)


def isdir(path):
    if is_local(path):
        return os.path.isdir(path)
    return _gfile().isdir(path)


def isfile(path):
    if is_local(path):
        return os.path.isfile(path)
    gfile = _gfile()
    return gfile.exists(path) and not gfile.isdir(path)


def getsize(path):
    """The size of the file `path` in bytes."""
    if is_local(path):
        return os.path.getsize(path)
    return _gfile().stat(path).length


def listdir(path):
    """The names in folder `path` (without the trailing `/` that `gs://`
    gives sub-folders)."""
    if is_local(path):
        return os.listdir(path)
    return [name.rstrip("/") for name in _gfile().listdir(path)]


def glob(pattern):
    if is_local(pattern):
        import glob as glob_lib

        return sorted(glob_lib.glob(pattern))
    return sorted(_gfile().glob(pattern))


# ------------------------------------------------------------------ writes


def makedirs(path, exist_ok=True):
    if is_local(path):
        os.makedirs(path, exist_ok=exist_ok)
        return
    gfile = _gfile()
    if not exist_ok and gfile.exists(path):
        raise FileExistsError(f"{path} exists.")
    gfile.makedirs(path)


def remove(path):
    """Deletes the file `path`."""
    if is_local(path):
        os.remove(path)
    else:
        _gfile().remove(path)


def rmtree(path, ignore_errors=False):
    """Deletes the folder `path` and everything in it."""
    if is_local(path):
        shutil.rmtree(path, ignore_errors=ignore_errors)
        return
    try:
        _gfile().rmtree(path)
    except Exception:
        if not ignore_errors:
            raise


def replace(src, dst):
    """Renames the file `src` to `dst`, replacing `dst`: `os.replace`
    (atomic) on a local disk, `tf.io.gfile.rename(overwrite=True)` (a copy
    then a delete on `gs://`) elsewhere. Folders with a scheme are not
    renamed (`ram://` would leave their contents behind): see
    `copytree`."""
    if is_local(src) and is_local(dst):
        os.replace(src, dst)
    else:
        _gfile().rename(src, dst, overwrite=True)


def _remove_before_writing(gfile, path):
    """Deletes the file `path` if it exists: `ram://` appends to a file
    opened for writing (or copied over) instead of replacing it."""
    if gfile.exists(path) and not gfile.isdir(path):
        gfile.remove(path)


def copy(src, dst):
    """Copies the file `src` to `dst` (replacing it)."""
    if is_local(src) and is_local(dst):
        shutil.copyfile(src, dst)
    else:
        gfile = _gfile()
        if not is_local(dst):
            _remove_before_writing(gfile, dst)
        gfile.copy(src, dst, overwrite=True)


def copytree(src, dst):
    """Copies the folder `src` into `dst` (created), file by file; either
    may be local or have a scheme."""
    makedirs(dst)
    for name in listdir(src):
        source, target = join(src, name), join(dst, name)
        if isdir(source):
            copytree(source, target)
        else:
            copy(source, target)


def write_locally(path, write):
    """Calls `write(folder)` to write the folder `path`: directly when
    `path` is local, else on a local temporary folder whose contents are
    then copied to `path` (for writers that only know local files, such as
    keras-hub's `save_to_preset`)."""
    if is_local(path):
        return write(path)
    local = tempfile.mkdtemp(prefix="recipes-")
    try:
        result = write(local)
        copytree(local, path)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return result


def save_figure(figure, path, **kwargs):
    """`figure.savefig(path, **kwargs)` (a matplotlib figure; the format
    from `path`'s ending), through memory for a path with a scheme."""
    if is_local(path):
        figure.savefig(path, **kwargs)
        return path
    buffer = io.BytesIO()
    kwargs.setdefault("format", os.path.splitext(path)[1][1:] or "png")
    figure.savefig(buffer, **kwargs)
    write_bytes(path, buffer.getvalue())
    return path


# ------------------------------------------------------------ reads, opens


class _TextWriter:
    """A text file on a file system with a scheme: strings are encoded and
    written to the underlying binary `tf.io.gfile.GFile`."""

    def __init__(self, raw, encoding):
        self._raw = raw
        self._encoding = encoding

    def write(self, text):
        self._raw.write(text.encode(self._encoding))
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        self._raw.flush()

    def close(self):
        self._raw.close()

    @property
    def closed(self):
        return self._raw.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open(path, mode="r", encoding=None, newline=None):  # noqa: A001
    """`open(path, mode, encoding=..., newline=...)` for a local path; for
    a path with a scheme a `tf.io.gfile.GFile` (binary modes), or a text
    file read whole into memory (`"r"`: `encoding` and `newline` as
    `open`'s) or written through (`"w"`, `"a"`: `encoding`, default
    UTF-8; no newline translation). `"w"` replaces an existing file
    (deleted first: `ram://` would append to it)."""
    if is_local(path):
        if "b" in mode:
            return builtins.open(path, mode)
        return builtins.open(path, mode, encoding=encoding, newline=newline)
    gfile = _gfile()
    if mode not in ("r", "w", "a", "rb", "wb", "ab"):
        raise ValueError(f"Argument `mode` must be one of 'r', 'w', 'a', "
                         f"'rb', 'wb', 'ab'. Received: mode={mode!r}")
    if mode.startswith("w"):
        _remove_before_writing(gfile, path)
    if "b" in mode:
        return gfile.GFile(path, mode)
    encoding = encoding or "utf-8"
    if mode == "r":
        with gfile.GFile(path, "rb") as f:
            return io.StringIO(f.read().decode(encoding), newline=newline)
    return _TextWriter(gfile.GFile(path, mode + "b"), encoding)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read_text(path, encoding="utf-8"):
    with open(path, encoding=encoding) as f:
        return f.read()


def write_text(path, text, encoding="utf-8"):
    with open(path, "w", encoding=encoding) as f:
        f.write(text)


def read_gzip(path):
    """The decompressed bytes of the gzip file `path`.

    Raises:
        OSError (`gzip.BadGzipFile`) or EOFError: not gzip, or cut short.
    """
    if is_local(path):
        with gzip.open(path, "rb") as f:
            return f.read()
    with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as f:
        return f.read()


def fsync(path):
    """Flushes the local file `path` to the disk (nothing to do for a path
    with a scheme: its file was written when it was closed)."""
    if is_local(path):
        with builtins.open(path, "rb") as f:
            os.fsync(f.fileno())


__all__ = [
    "abspath", "basename", "check_filesystem", "copy", "copytree", "dirname",
    "exists", "fsync", "getsize", "glob", "isdir", "isfile", "is_local",
    "join", "listdir", "makedirs", "open", "read_bytes", "read_gzip",
    "read_text", "remove", "replace", "rmtree", "save_figure", "scheme",
    "split",
    "write_bytes", "write_locally", "write_text",
]
