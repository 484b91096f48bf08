"""Data-file checks shared by the recipes (every backend; local paths and
`gs://` alike through `tf.io.gfile`)."""

from recipes.core import storage


class DataError(ValueError):
    """A missing or malformed data file; the message says what was expected."""


def check_data_file(path, what="data file"):
    """Returns `path` if it is a readable, non-empty file.

    Raises:
        DataError: naming `what` was expected and where.
    """
    gfile = storage.gfile()
    if not gfile.exists(path):
        raise DataError(f"Expected the {what} at {path}; no such file.")
    if gfile.isdir(path):
        raise DataError(f"Expected the {what} at {path}; it is not a file.")
    if gfile.stat(path).length == 0:
        raise DataError(f"The {what} at {path} is empty.")
    return path
