"""Data-file checks shared by the recipes (pure Python, every backend;
paths with a scheme such as `gs://` through `tf.io.gfile`)."""

import os

from recipes.core import storage


class DataError(ValueError):
    """A missing or malformed data file; the message says what was expected."""


def check_data_file(path, what="data file"):
    """Returns `path` if it is a readable, non-empty file.

    Raises:
        DataError: naming `what` was expected and where.
    """
    if storage.is_local(path):  # no TensorFlow for a local file
        exists, isdir = os.path.exists(path), os.path.isdir(path)
        size = os.path.getsize(path) if exists and not isdir else 0
    else:
        gfile = storage.gfile()
        exists, isdir = gfile.exists(path), gfile.isdir(path)
        size = gfile.stat(path).length if exists and not isdir else 0
    if not exists:
        raise DataError(f"Expected the {what} at {path}; no such file.")
    if isdir:
        raise DataError(f"Expected the {what} at {path}; it is not a file.")
    if size == 0:
        raise DataError(f"The {what} at {path} is empty.")
    return path
