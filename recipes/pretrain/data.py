"""The pretraining corpus and its windows (pure Python and NumPy).

Sources (`--dataset`):

- `builtin`: the text that ships with the recipes, for offline runs: the
  sentences of the GLUE built-in task's training file (without labels) and
  the language-model recipe's built-in plays.
- `files`: `--train_files`, one or more files or glob patterns (`.gz` read
  transparently), read in order as one corpus; one document a line.
- any other name: a tensorflow_datasets set with a `text` feature
  (`c4/en`, `wiki40b/en`, ...), its train split.

Packing: every line is tokenized, the lines joined into one token stream
(each followed by the end token, `[SEP]`), and the stream cut into
consecutive windows of exactly `window` tokens. A sentence that crosses a
window boundary continues in the next window; only the last window may be
short, and it is padded, not dropped: every token of the corpus is in
exactly one window. The held-out windows are a fixed, seeded sample of the
windows (`--valid_fraction`) or the windows of `--valid_file`.
"""

import os

import numpy as np

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.glue import tasks
from recipes.glue import tsv
from recipes.lm import data as lm_data

BUILTIN = "builtin"
FILES = "files"


def builtin_texts():
    """The lines of the built-in corpus (see the module docstring)."""
    glue_train = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "glue", "data", "builtin", "train.tsv")
    sentences = [texts[0] for texts in tsv.read_tsv(
        glue_train, tasks.get_task("builtin")).texts]
    plays = lm_data.documents(lm_data.read_text_file(
        lm_data.builtin_files()["train"], "built-in plays"))
    return sentences + plays


def expand_patterns(patterns, flag="--train_files"):
    """The files `patterns` name (globs expanded, sorted per pattern, in
    the order given).

    Raises:
        DataError: a pattern matches nothing.
    """
    paths = []
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            matched = sorted(storage.gfile().glob(pattern))
            if not matched:
                raise DataError(f"Argument `{flag}`: the pattern {pattern!r} "
                                "matches no file.")
            paths.extend(matched)
        else:
            paths.append(pattern)
    return paths


def read_lines(paths, what="training file", tsv_column="sentence"):
    """The documents of `paths`, in order: the non-empty lines of text
    files (UTF-8, `.gz` read transparently), the `tsv_column` column of
    `.tsv` files with a header row (GLUE's `SST-2/train.tsv`: its
    sentences without their labels). A missing, empty or non-UTF-8 file, or
    a TSV file without that column, is a `DataError` that names it."""
    lines = []
    for path in paths:
        if path.endswith(".tsv"):
            lines.extend(read_tsv_column(path, tsv_column, what))
        else:
            lines.extend(lm_data.documents(lm_data.read_text_file(path,
                                                                  what)))
    return lines


def read_tsv_column(path, column, what="training file"):
    """The non-empty values of the column named `column` of a TSV file
    whose first row names its columns."""
    rows = [line.split("\t") for line in
            lm_data.read_text_file(path, what).splitlines()]
    header = rows[0]
    if column not in header:
        raise DataError(
            f"The {what} {path} has no column {column!r} (its header names "
            f"{header}); pass --tsv_column=NAME.")
    index = header.index(column)
    values = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(
                f"The {what} {path}, line {number}: {len(row)} fields, "
                f"expected {len(header)} as in its header.")
        if row[index].strip():
            values.append(row[index])
    return values


def read_tfds(name, data_dir=None, max_examples=None):
    """The training lines of tensorflow_datasets `name` (its `text`
    feature)."""
    corpus = lm_data.load_tfds(name, data_dir, max_examples)
    return lm_data.documents(corpus["train"])


def pack_windows(documents, window, end_id, pad_id=0):
    """Packs token-id documents into `(num_windows, window)` int32 rows.

    Each document is followed by `end_id`; the joined stream is cut every
    `window` tokens; the last, partial window is padded with `pad_id`.

    Returns:
        `(windows, lengths)`: the rows and the number of real tokens in
        each (all `window` but maybe the last).
    """
    if window < 1:
        raise ValueError(f"Expected a positive window. Received: {window}")
    pieces = []
    for ids in documents:
        pieces.append(np.asarray(ids, "int32"))
        pieces.append(np.asarray([end_id], "int32"))
    stream = np.concatenate(pieces) if pieces else np.zeros(0, "int32")
    count = -(-len(stream) // window)
    padded = np.full(count * window, pad_id, "int32")
    padded[:len(stream)] = stream
    lengths = np.full(count, window, "int32")
    if count and len(stream) % window:
        lengths[-1] = len(stream) % window
    return padded.reshape(count, window), lengths


def hold_out(windows, lengths, fraction, seed):
    """Splits the windows into `(train, valid)`, each a `(windows,
    lengths)` pair: a seeded sample of `round(fraction * n)` windows (at
    least one when `fraction > 0`) is held out.

    Raises:
        DataError: too few windows to hold any out and keep one for
            training.
    """
    count = len(windows)
    held = max(1, int(round(fraction * count))) if fraction > 0 else 0
    if held >= count:
        raise DataError(
            f"The corpus packs into {count} window(s); --valid_fraction="
            f"{fraction} leaves none for training. Use more text or a "
            "smaller --valid_fraction (or a --valid_file).")
    order = np.random.default_rng(seed).permutation(count)
    valid, train = np.sort(order[:held]), np.sort(order[held:])
    return (windows[train], lengths[train]), (windows[valid], lengths[valid])


__all__ = ["BUILTIN", "FILES", "DataError", "builtin_texts",
           "expand_patterns", "hold_out", "pack_windows", "read_lines",
           "read_tfds"]
