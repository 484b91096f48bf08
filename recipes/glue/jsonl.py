"""Readers for SuperGLUE's released JSONL files (through `tf.io.gfile`:
local or `gs://`), and its submission files.

SuperGLUE distributes each task as a folder (`BoolQ/train.jsonl`,
`val.jsonl`, `test.jsonl`), one JSON object a line with the task's fields,
`idx` and (train/val) `label`: JSON `true`/`false` (BoolQ, WiC, WSC), a
string (CB, RTE) or `0`/`1` (COPA). WSC's spans are in `target`.
Each example becomes the task's text segments (`Task.segments`).
"""

import json

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.core.storage import join
from recipes.glue import tsv
from recipes.glue.tsv import Split


def _label_string(task, value):
    """A JSON label as one of `task.labels` (`true` -> `"True"`; COPA's
    `0`/`1` -> `"choice1"`/`"choice2"`), else the value unchanged."""
    if isinstance(value, bool):
        return str(value)
    if (isinstance(value, int) and task.labels == ("choice1", "choice2")
            and value in (0, 1)):
        return task.labels[value]
    return value


def example_segments(task, example, where):
    """`task.segments(example)`; DataError naming `where` on a missing
    field or a value the task cannot use."""
    fields = dict(example)
    if isinstance(fields.get("target"), dict):  # WSC's spans
        fields.update(fields["target"])
    missing = [f for f in task.tfds_text if f not in fields]
    if missing:
        raise DataError(
            f"{where}: no field(s) {missing}; expected SuperGLUE's "
            f"{task.glue_dir} fields {list(task.tfds_text)}, found "
            f"{sorted(example)}.")
    try:
        segments = task.segments(fields)
    except (ValueError, TypeError, KeyError) as error:
        raise DataError(f"{where}: {error} (task {task.name!r})") from None
    return tuple(str(s) for s in segments)


def read_jsonl(path, task, labeled=True):
    """Reads one SuperGLUE JSONL file of `task`.

    Args:
        path: the file, e.g. `.../BoolQ/train.jsonl`.
        task: a SuperGLUE `recipes.glue.tasks.Task`.
        labeled: whether the examples have labels (train/val) or not (test).

    Returns:
        A `Split` (ids: the examples' `idx`).

    Raises:
        DataError: the file is missing or empty, or a line is not a JSON
            object, lacks a field or has an unknown label. The message names
            the file, the line and what was expected.
    """
    if not storage.isfile(path):
        raise DataError(f"Data file not found: {path}")
    with storage.gfile().GFile(path, "rb") as f:
        text = f.read().decode("utf-8-sig")
    texts, labels, ids = [], [], []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue  # a trailing empty line
        where = f"{path}, line {line}"
        try:
            example = json.loads(raw)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{where}: not valid JSON ({error.msg} at column "
                f"{error.colno}); expected one JSON object a line "
                f"(SuperGLUE's {task.glue_dir} JSONL).") from None
        if not isinstance(example, dict):
            raise DataError(
                f"{where}: expected a JSON object, found "
                f"{type(example).__name__} ({raw[:40]!r}).")
        texts.append(example_segments(task, example, where))
        if labeled:
            if "label" not in example:
                raise DataError(
                    f"{where}: no 'label'; expected one of "
                    f"{list(task.labels)} in a train/val file.")
            value = _label_string(task, example["label"])
            if value not in task.labels:
                raise DataError(
                    f"{where}: unknown label {example['label']!r} for task "
                    f"{task.name!r}; expected one of {list(task.labels)} "
                    "(or JSON true/false, COPA 0/1).")
            labels.append(task.labels.index(value))
        ids.append(example.get("idx", len(ids)))
    if not texts:
        raise DataError(f"{path} has no examples.")
    return Split(texts=texts, labels=labels if labeled else None, ids=ids)


def find_task_dir(data_dir, task):
    """Returns the folder with `task`'s JSONL files under `data_dir`:
    SuperGLUE's root (holding `BoolQ/`, `CB/`, ...) or the task's folder.

    Raises:
        DataError: neither holds the task's `train.jsonl`.
    """
    if not storage.gfile().isdir(data_dir):
        raise DataError(
            f"--data_dir={data_dir} is not a directory. Expected SuperGLUE's "
            f"layout: {join(data_dir, task.glue_dir, 'train.jsonl')}, ... "
            "(or the task folder itself).")
    candidates = [join(data_dir, task.glue_dir), data_dir]
    for folder in candidates:
        if storage.isfile(join(folder, "train.jsonl")):
            return folder
    hint = ""
    if any(storage.isfile(join(folder, "train.tsv")) for folder in candidates):
        hint = (" These are GLUE's TSV files: GLUE's RTE is --task=rte."
                if task.name == "superglue_rte" else
                " Found GLUE's TSV files instead.")
    raise DataError(
        f"--data_dir={data_dir} has no files of task {task.name!r}. "
        f"Expected SuperGLUE's {task.glue_dir} layout: "
        f"{join(candidates[0], 'train.jsonl')}, "
        f"{join(candidates[0], 'val.jsonl')} (or "
        f"{join(data_dir, 'train.jsonl')} when --data_dir is the task "
        f"folder). Found: {sorted(storage.gfile().listdir(data_dir))[:10]}."
        + hint)


def read_task_dir(folder, task, with_test=True):
    """Reads `train.jsonl`, `val.jsonl` and (if present) `test.jsonl`.

    Returns:
        `(train, evals, tests)` as `tsv.read_task_dir`.
    """
    return tsv.read_task_dir(folder, task, with_test, read=read_jsonl,
                             train_file="train.jsonl")


def write_submission(path, task, ids, predictions):
    """Writes predictions in SuperGLUE's submission format: one
    `{"idx": ..., "label": ...}` a line, labels as `task.submission_labels`
    (`"true"`/`"false"`, `"entailment"`, COPA's `0`/`1`)."""
    import os

    storage.gfile().makedirs(os.path.dirname(path) or ".")
    lines = [json.dumps({"idx": i,
                         "label": task.submission_labels[int(p)]}) + "\n"
             for i, p in zip(ids, predictions)]
    storage.write_file(path, "".join(lines))
