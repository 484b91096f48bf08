"""Data-file checks shared by the recipes (pure Python, every backend;
paths with a scheme such as `gs://` through `recipes.core.files`)."""

from recipes.core import files


class DataError(ValueError):
    """A missing or malformed data file; the message says what was expected."""


def check_data_file(path, what="data file"):
    """Returns `path` if it is a readable, non-empty file.

    Raises:
        DataError: naming `what` was expected and where.
    """
    if not files.exists(path):
        raise DataError(f"Expected the {what} at {path}; no such file.")
    if not files.isfile(path):
        raise DataError(f"Expected the {what} at {path}; it is not a file.")
    if files.getsize(path) == 0:
        raise DataError(f"The {what} at {path} is empty.")
    return path
