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


def load_tfds_split(name, split, data_dir, convert, files_hint,
                    max_examples=None):
    """`[convert(example)]` of split `split` of tensorflow_datasets `name`
    (NumPy examples; the first `max_examples` if given).

    Raises:
        DataError: the split could not be loaded (the message says to
            prepare it, or pass `files_hint`, or run `--dataset=builtin`),
            or it is empty.
    """
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir)
    except Exception as error:
        raise DataError(
            f"Could not load tensorflow_datasets {name!r} split "
            f"{split!r} ({type(error).__name__}: {error}). Prepare "
            f"it with network access (tfds build), or pass {files_hint}, "
            "or run --dataset=builtin.") from error
    if max_examples:
        dataset = dataset.take(max_examples)
    examples = [convert(e) for e in tfds.as_numpy(dataset)]
    if not examples:
        raise DataError(f"tensorflow_datasets {name!r} split {split!r} is "
                        "empty.")
    return examples


def add_tfds_data_dir_flag(group):
    group.add_argument("--tfds_data_dir", default=None,
                       help="data_dir of tensorflow_datasets (default: "
                       "its own, ~/tensorflow_datasets).")


def add_data_source_flags(group, splits, dataset_default, dataset_help,
                          file_help):
    """`--dataset`, `--tfds_data_dir` and a `--<split>_file` per split
    (`file_help(split)` its help) for a recipe reading tensorflow_datasets,
    a built-in set or one file per split."""
    group.add_argument("--dataset", default=dataset_default,
                       help=dataset_help)
    add_tfds_data_dir_flag(group)
    for split in splits:
        group.add_argument(f"--{split}_file", default=None,
                           help=file_help(split))
