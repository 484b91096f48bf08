"""Readers for GLUE's own TSV files (through `tf.io.gfile`: local or `gs://`).

GLUE distributes each task as a folder (`SST-2/train.tsv`, `dev.tsv`,
`test.tsv`; MNLI has `dev_matched.tsv`, `dev_mismatched.tsv`, ...). The files
are tab separated and *not* quoted: a `"` is part of the text
(`csv.QUOTE_NONE`). CoLA's train/dev files have no header; MRPC's header may
start with a byte-order mark; test files have an `index` (QQP: `id`) column
and no labels.
"""

import csv
import dataclasses
import io
import os
import sys

from recipes.core import storage
from recipes.core.storage import join
from recipes.core.data_files import DataError

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclasses.dataclass
class Split:
    """Examples of one split.

    Attributes:
        texts: one tuple of 1 or 2 strings per example.
        labels: class indices (int) or scores (float); `None` for test splits.
        ids: the example ids (GLUE's `index` column, or the row number).
    """

    texts: list
    labels: list = None
    ids: list = None

    def __len__(self):
        return len(self.texts)

    def column(self, i):
        return [t[i] for t in self.texts]


def _rows(path):
    if not storage.isfile(path):
        raise DataError(f"Data file not found: {path}")
    with storage.gfile().GFile(path, "rb") as f:
        text = f.read().decode("utf-8-sig")
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for line, row in enumerate(reader, start=1):
            if row == [] or row == [""]:
                continue  # a trailing empty line
            yield line, row


def _parse_label(task, value, path, line):
    value = value.strip()
    if task.is_regression:
        try:
            return float(value)
        except ValueError:
            raise DataError(
                f"{path}, line {line}: expected a numeric score in column "
                f"{task.label_column!r} for task {task.name!r}, found "
                f"{value!r}."
            ) from None
    if value not in task.labels:
        raise DataError(
            f"{path}, line {line}: unknown label {value!r} in column "
            f"{task.label_column!r} for task {task.name!r}; expected one of "
            f"{list(task.labels)}."
        )
    return task.labels.index(value)


def read_tsv(path, task, labeled=True):
    """Reads one GLUE TSV file of `task`.

    Args:
        path: the file, e.g. `.../SST-2/train.tsv`.
        task: a `recipes.glue.tasks.Task`.
        labeled: whether the file has labels (train/dev) or not (test).

    Returns:
        A `Split`.

    Raises:
        DataError: the file is missing, empty, lacks an expected column, has
            a row with the wrong number of fields or an unknown label. The
            message names the file, the line and what was expected.
    """
    rows = _rows(path)
    texts, labels, ids = [], [], []
    if labeled and task.headerless:
        # CoLA: no header, fixed positions.
        width = max(task.headerless.values()) + 1
        text_index = [task.headerless["sentence"]]
        label_index = task.headerless["label"]
        id_index = None
        header = None
    else:
        try:
            line, header = next(rows)
        except StopIteration:
            raise DataError(
                f"{path} is empty; expected GLUE's TSV layout with a header "
                "line."
            ) from None
        header = [h.strip() for h in header]
        needed = list(task.text_columns)
        if labeled:
            needed.append(task.label_column)
        missing = [c for c in needed if c not in header]
        if task.headerless and not labeled:
            needed = ["sentence"]
            missing = [c for c in needed if c not in header]
        if missing:
            raise DataError(
                f"{path}: the header has no column(s) {missing}. Expected "
                f"GLUE's {task.glue_dir} layout with columns {needed}; found "
                f"{header}."
            )
        width = len(header)
        text_index = [header.index(c) for c in needed[: task.num_segments]]
        if task.headerless and not labeled:
            text_index = [header.index("sentence")]
        label_index = header.index(task.label_column) if labeled else None
        id_index = next(
            (header.index(c) for c in ("index", "id") if c in header), None
        )
    for line, row in rows:
        if len(row) != width:
            expected = header if header else f"{width} fields"
            raise DataError(
                f"{path}, line {line}: expected {width} tab-separated fields "
                f"({expected}), found {len(row)}. Is this GLUE's "
                f"{task.glue_dir} file?"
            )
        texts.append(tuple(row[i] for i in text_index))
        if labeled:
            labels.append(_parse_label(task, row[label_index], path, line))
        ids.append(row[id_index].strip() if id_index is not None
                   else len(ids))
    if not texts:
        raise DataError(f"{path} has no examples.")
    return Split(texts=texts, labels=labels if labeled else None, ids=ids)


def find_task_dir(data_dir, task):
    """Returns the folder with `task`'s files under `data_dir`.

    `data_dir` may be GLUE's root (holding `SST-2/`, `MNLI/`, ...) or the
    task's folder itself.

    Raises:
        DataError: neither holds the task's training file.
    """
    if not storage.gfile().isdir(data_dir):
        raise DataError(
            f"--data_dir={data_dir} is not a directory. Expected GLUE's "
            f"layout: {join(data_dir, task.glue_dir, 'train.tsv')}, "
            "... (or the task folder itself)."
        )
    candidates = [join(data_dir, task.glue_dir), data_dir]
    for folder in candidates:
        if storage.isfile(join(folder, "train.tsv")):
            return folder
    expected = [join(candidates[0], "train.tsv")] + [
        join(candidates[0], f) for f, *_ in task.eval_splits.values()
    ]
    hint = ""
    if any(storage.isfile(join(folder, "train.jsonl"))
           for folder in candidates):
        hint = (" These are SuperGLUE's JSONL files: SuperGLUE's RTE is "
                "--task=superglue_rte." if task.name == "rte" else
                " Found SuperGLUE's JSONL files instead.")
    raise DataError(
        f"--data_dir={data_dir} has no files of task {task.name!r}. "
        f"Expected GLUE's {task.glue_dir} layout: {', '.join(expected)} "
        f"(or {join(data_dir, 'train.tsv')} when --data_dir is the "
        f"task folder). Found: {sorted(storage.gfile().listdir(data_dir))[:10]}"
        + hint
    )


def read_task_dir(folder, task, with_test=True, read=None,
                  train_file="train.tsv"):
    """Reads train, evaluation and (if present) test splits of `task`.

    `read(path, task, labeled=True)` reads one file (default `read_tsv`;
    `recipes.glue.jsonl` passes its JSONL reader and `train.jsonl`).

    Returns:
        `(train, evals, tests)`: a `Split`, `{name: Split}`,
        `{name: Split}`. Test files are optional (GLUE's test labels are
        hidden; their predictions go into a submission file).
    """
    read = read or read_tsv
    train = read(join(folder, train_file), task)
    evals = {}
    for split, (filename, *_) in task.eval_splits.items():
        path = join(folder, filename)
        if not storage.isfile(path):
            raise DataError(
                f"Task {task.name!r}: evaluation file {path} not found. "
                f"Expected {', '.join(f for f, *_ in task.eval_splits.values())}"
                f" next to {join(folder, train_file)}."
            )
        evals[split] = read(path, task)
    tests = {}
    if with_test:
        for split, (filename, *_) in task.test_splits.items():
            path = join(folder, filename)
            if storage.isfile(path):
                tests[split] = read(path, task, labeled=False)
    return train, evals, tests


def write_submission(path, task, ids, predictions):
    """Writes predictions in GLUE's submission format (`index<TAB>prediction`).

    Labels are written as GLUE expects them: label names for MNLI, QNLI and
    RTE, `0`/`1` for the binary tasks, scores clipped to [0, 5] for STS-B.
    """
    storage.gfile().makedirs(os.path.dirname(path) or ".")
    lines = ["index\tprediction\n"]
    for i, p in zip(ids, predictions):
        if task.is_regression:
            value = f"{min(5.0, max(0.0, float(p))):.3f}"
        else:
            value = task.labels[int(p)]
        lines.append(f"{i}\t{value}\n")
    storage.write_file(path, "".join(lines))
