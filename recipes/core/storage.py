"""Reading and writing the recipes' files, local or on any file system
`tf.io.gfile` knows (`gs://bucket/run`, `ram://`): every file operation of
the recipes goes through `tf.io.gfile` (here, or in Keras' and
TensorFlow's own savers, which take such paths themselves).

Importing this module imports neither TensorFlow nor Keras.
"""

import io
import json
import os
import posixpath
import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")



def gfile():
    """`tf.io.gfile` (TensorFlow imported on first use)."""
    import tensorflow as tf

    return tf.io.gfile


def is_local(path):
    """Whether `path` has no `scheme://` prefix."""
    return _SCHEME.match(os.fspath(path)) is None


def join(path, *names):
    """`os.path.join`, keeping a `scheme://` prefix intact."""
    return (os.path.join if is_local(path) else posixpath.join)(path, *names)


def check_filesystem(path, flag):
    """`path`, or a ValueError naming `--flag` if its scheme is one
    `tf.io.gfile` does not know (`gcs://` for `gs://`). A local path is
    accepted without importing TensorFlow."""
    if is_local(path):
        return path
    import tensorflow as tf

    try:
        gfile().exists(path)
    except tf.errors.UnimplementedError:
        known = sorted(s + "://" for s in gfile().get_registered_schemes()
                       if s)
        raise ValueError(
            f"Argument `--{flag}`: the file system "
            f"{_SCHEME.match(path).group(0)} of {path!r} is not known to "
            f"tf.io.gfile; expected a local path or one of "
            f"{', '.join(known)}. Received: --{flag}={path}") from None
    return path


def isfile(path):
    """Whether `path` exists and is not a folder."""
    return gfile().exists(path) and not gfile().isdir(path)


def read_bytes(path):
    with gfile().GFile(path, "rb") as f:
        return f.read()


def read_text(path):
    return read_bytes(path).decode("utf-8")


def read_json(path):
    return json.loads(read_text(path))


def write_file(path, data):
    """Writes `data` (bytes, or text as UTF-8) at a name next to `path`,
    then renames it to
    `path`: readers see the previous file or the new one, never half of it
    (and `ram://`, which appends to a file opened again, is replaced)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    if gfile().exists(tmp):
        gfile().remove(tmp)
    with gfile().GFile(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    gfile().rename(tmp, path, overwrite=True)
    return path


def save_figure(figure, path, **kwargs):
    """`figure.savefig` (matplotlib; the format from `path`'s ending) to
    `path`, its folder created."""
    buffer = io.BytesIO()
    kwargs.setdefault("format", os.path.splitext(path)[1][1:] or "png")
    figure.savefig(buffer, **kwargs)
    gfile().makedirs(os.path.dirname(path) or ".")
    return write_file(path, buffer.getvalue())


def write_json(path, data):
    return write_file(path, json.dumps(data, indent=2, default=str) + "\n")


__all__ = ["check_filesystem", "gfile", "is_local", "isfile", "join",
           "read_bytes", "read_json", "read_text", "save_figure",
           "write_file", "write_json"]
