"""Where a GLUE task's examples come from: the built-in task, GLUE's TSV
files or SuperGLUE's JSONL files (`--data_dir`), or `tensorflow_datasets`
(the default: `glue/<task>`, `super_glue/<task>`)."""

import importlib.resources

from recipes.core.data_files import DataError
from recipes.glue import jsonl, tsv


def builtin_dir():
    """The folder of the built-in task (package data of `recipes.glue`)."""
    return str(importlib.resources.files("recipes.glue") / "data" / "builtin")


def load_task_data(task, data_dir=None, tfds_data_dir=None):
    """Returns `(train, evals, tests)` (see `tsv.read_task_dir`)."""
    if task.name == "builtin":
        if data_dir:
            raise ValueError(
                "--task=builtin reads the data shipped with the package; "
                f"don't pass --data_dir (received --data_dir={data_dir})."
            )
        return tsv.read_task_dir(builtin_dir(), task)
    if data_dir and task.is_superglue:
        return jsonl.read_task_dir(jsonl.find_task_dir(data_dir, task), task)
    if data_dir:
        return tsv.read_task_dir(tsv.find_task_dir(data_dir, task), task)
    return load_tfds(task, tfds_data_dir)


def _tfds_split(task, name, labeled, data_dir):
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(task.tfds_name, split=name, data_dir=data_dir)
    except Exception as error:  # offline, not prepared, ...
        raise DataError(
            f"Could not load tensorflow_datasets {task.tfds_name!r} split "
            f"{name!r} ({type(error).__name__}: {error}). Prepare it with "
            "network access, or pass --data_dir with "
            + ("SuperGLUE's JSONL files" if task.is_superglue
               else "GLUE's TSV files") + ", or run --task=builtin."
        ) from error
    texts, labels, ids = [], [], []
    for number, example in enumerate(tfds.as_numpy(dataset)):
        if task.is_superglue:
            fields = {c: _python(example[c]) for c in task.tfds_text}
            texts.append(jsonl.example_segments(
                task, fields, f"tensorflow_datasets {task.tfds_name!r} split "
                f"{name!r}, example {number}"))
        else:
            texts.append(tuple(example[c].decode("utf-8")
                               for c in task.tfds_text))
        label = example["label"]
        labels.append(float(label) if task.is_regression else int(label))
        ids.append(int(example["idx"]))
    if not texts:
        raise DataError(f"tensorflow_datasets {task.tfds_name!r} split "
                        f"{name!r} is empty.")
    # GLUE's test labels are hidden (-1 in tensorflow_datasets).
    return tsv.Split(texts=texts, labels=labels if labeled else None,
                     ids=ids)


def _python(value):
    """A `tfds.as_numpy` scalar as Python: bytes as text, NumPy ints."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value.item() if hasattr(value, "item") else value


def load_tfds(task, data_dir=None):
    train = _tfds_split(task, "train", True, data_dir)
    evals = {split: _tfds_split(task, tfds_split, True, data_dir)
             for split, (_, tfds_split) in task.eval_splits.items()}
    tests = {split: _tfds_split(task, tfds_split, False, data_dir)
             for split, (_, tfds_split, _) in task.test_splits.items()}
    return train, evals, tests


def subsample(split, limit):
    """The first `limit` examples of `split` (all when `limit` is None)."""
    if not limit or limit >= len(split):
        return split
    return tsv.Split(
        texts=split.texts[:limit],
        labels=None if split.labels is None else split.labels[:limit],
        ids=split.ids[:limit],
    )
