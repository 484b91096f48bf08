"""Text for the language-model recipe: readers and the two ways to cut it.

Pure Python and NumPy (no TensorFlow): plain or gzipped UTF-8 files, the
built-in corpus, tensorflow_datasets sets with a `text` feature, and the
cuts of token ids into training and evaluation windows.

Two ways to cut text (`--cut`):

- `stream`: every document (line) of a split joined into one token stream
  (lines end with a newline character for the char tokenizer, with `[SEP]`
  for WordPiece), cut into windows of `sequence_length + 1` tokens; a
  window's first `sequence_length` tokens are the inputs, its last
  `sequence_length` the labels (nanoGPT's character-level setup).
- `sentence`: one document per example, `[CLS] tokens [SEP]`, padded to
  `sequence_length + 1` (LM1B's setup). A document longer than that is cut
  into consecutive pieces (none of its tokens is dropped).

Evaluation scores every token once: `eval_windows` returns the windows and
a weight per label, 1 where the label's position is scored for the first
time and 0 elsewhere (padding, or context already scored by an earlier
window with a sliding `eval_stride`).
"""

import gzip
import os

import numpy as np

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.core.data_files import check_data_file
from recipes.core.data_files import load_tfds_split

SPLITS = ("train", "valid", "test")
BUILTIN = "builtin"
CUTS = ("stream", "sentence")
TOKENIZERS = ("char", "byte", "wordpiece")
SAMPLERS = ("greedy", "top_k", "top_p", "random")
TFDS_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "data", "builtin")


# ------------------------------------------------------------------ readers


def read_text_file(path, what="text file"):
    """The UTF-8 text of `path` (gzip read transparently when it ends with
    `.gz`).

    Raises:
        DataError: missing, empty (also after decompression), not gzip
            despite `.gz`, or not UTF-8 (the byte offset is named).
    """
    check_data_file(path, what)
    try:
        raw = storage.read_bytes(path)
        raw = gzip.decompress(raw) if path.endswith(".gz") else raw
    except (OSError, EOFError) as error:
        raise DataError(
            f"Could not read the {what} {path} ({error}); expected "
            f"{'gzip-compressed ' if path.endswith('.gz') else ''}UTF-8 text."
        ) from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(
            f"The {what} {path} is not UTF-8 text: byte {error.start} "
            f"({raw[error.start:error.start + 1]!r}) is invalid "
            f"({error.reason}). Convert it to UTF-8 (e.g. iconv)."
        ) from None
    if not text.strip():
        raise DataError(f"The {what} {path} holds no text.")
    return text


def load_files(paths):
    """`{split: text}` from `{split: path or None}`; `train` is required."""
    if not paths.get("train"):
        raise DataError("Argument `--train_file` is required with text "
                        "files (`--valid_file`, `--test_file` are optional).")
    return {split: read_text_file(path, f"{split} file (--{split}_file)")
            for split, path in paths.items() if path}


def builtin_files():
    """The built-in corpus' files (`recipes/lm/data/builtin/`)."""
    return {split: os.path.join(BUILTIN_DIR, f"{split}.txt" + (
        ".gz" if split == "train" else "")) for split in SPLITS}


def load_tfds(name, data_dir=None, max_examples=None):
    """`{split: text}` from a tensorflow_datasets set with a `text` feature,
    one example a line (splits as `tfds_splits` says).
    """
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
        info = builder.info
        available = set(info.splits.keys())
    except Exception as error:
        raise DataError(f"Could not open tensorflow_datasets {name!r} "
                        f"({type(error).__name__}: {error}).") from error
    features = getattr(info, "features", None)
    if features is not None and "text" not in features:
        raise DataError(
            f"tensorflow_datasets {name!r} has no `text` feature (it has "
            f"{sorted(features.keys())}); --dataset needs one.")

    def read(tfds_split):
        return load_tfds_split(
            name, tfds_split, data_dir,
            lambda e: e["text"].decode("utf-8").replace("\n", " "),
            "text files (--train_file/...)", max_examples)

    corpus, halves = {}, {}
    for split, (tfds_split, half) in tfds_splits(name, available).items():
        if half is None:
            corpus[split] = "\n".join(read(tfds_split)) + "\n"
            continue
        if tfds_split not in halves:
            halves[tfds_split] = read(tfds_split)
        lines = halves[tfds_split]
        middle = max(1, len(lines) // 2)
        part = lines[:middle] if half == 0 else lines[middle:]
        if part:
            corpus[split] = "\n".join(part) + "\n"
    return corpus


def tfds_splits(name, available):
    """`{split: (tfds split, half)}`: which tfds split (and which half of
    it, 0 or 1, or None for all) each of our splits reads.

    A set without a validation split (LM1B has train and test) gets the
    first half of its test split as `valid`, the second half as `test`.
    When the splits are unknown (no dataset info), all three are read.
    """
    available = set(available or ())
    if not available:
        return {"train": ("train", None), "valid": ("validation", None),
                "test": ("test", None)}
    if "train" not in available:
        raise DataError(f"tensorflow_datasets {name!r} has no train split "
                        f"(it has {sorted(available)}).")
    plan = {"train": ("train", None)}
    if "validation" in available:
        plan["valid"] = ("validation", None)
        if "test" in available:
            plan["test"] = ("test", None)
    elif "test" in available:
        plan["valid"] = ("test", 0)
        plan["test"] = ("test", 1)
    return plan


def documents(text):
    """The non-empty lines of `text` (the `sentence` cut's examples)."""
    return [line for line in text.split("\n") if line.strip()]


# --------------------------------------------------------------------- cuts


def stream_windows(ids, sequence_length, offset=0):
    """Training windows `(n, sequence_length + 1)` of a token stream,
    starting at `offset` (0 <= offset < sequence_length) with a stride of
    `sequence_length` (consecutive windows share one token: the last label
    of one is the first input of the next). The tail shorter than a window
    is left for another epoch's offset."""
    ids = np.asarray(ids, dtype="int32")
    span = sequence_length + 1
    count = max(0, (len(ids) - offset - 1) // sequence_length)
    if count == 0:
        return np.zeros((0, span), "int32")
    starts = offset + sequence_length * np.arange(count)
    return ids[starts[:, None] + np.arange(span)[None, :]]


def sentence_examples(docs_ids, sequence_length, start_id, end_id, pad_id=0):
    """The `sentence` cut: `[CLS] ids [SEP]` per document, padded to
    `sequence_length + 1`; a longer document is cut into consecutive pieces
    sharing one token, so each of its tokens is a label exactly once.

    Returns:
        `(windows, weights)`: `(n, sequence_length + 1)` ids and
        `(n, sequence_length)` label weights (0 on padding).
    """
    span = sequence_length + 1
    windows, weights = [], []
    for ids in docs_ids:
        seq = [start_id] + [int(i) for i in ids] + [end_id]
        start = 0
        while start + 1 < len(seq):
            piece = seq[start:start + span]
            labels = len(piece) - 1
            windows.append(piece + [pad_id] * (span - len(piece)))
            weights.append([1.0] * labels + [0.0] * (sequence_length - labels))
            start += sequence_length
    return (np.asarray(windows, "int32").reshape(-1, span),
            np.asarray(weights, "float32").reshape(-1, sequence_length))


def eval_windows(ids, sequence_length, stride=None, pad_id=0):
    """Windows over a token stream that score every token but the first
    exactly once.

    With `stride=None` (or `sequence_length`) the windows do not overlap:
    each label is scored with the context of its own window. With a smaller
    `stride`, windows start every `stride` tokens and only the labels not
    scored by an earlier window count (more context per token, more
    windows). The last window is padded (weight 0).

    Returns:
        `(windows, weights)`: `(n, sequence_length + 1)` ids and
        `(n, sequence_length)` weights; `weights.sum() == len(ids) - 1`.
    """
    stride = stride or sequence_length
    if not 0 < stride <= sequence_length:
        raise ValueError(
            f"Argument `--eval_stride` must be in [1, --sequence_length="
            f"{sequence_length}]. Received: --eval_stride={stride}")
    ids = np.asarray(ids, dtype="int32")
    span = sequence_length + 1
    windows, weights = [], []
    scored_until = 0  # labels at positions 1 .. scored_until are scored
    start = 0
    while scored_until < len(ids) - 1:
        piece = ids[start:start + span]
        window = np.full(span, pad_id, "int32")
        window[:len(piece)] = piece
        weight = np.zeros(sequence_length, "float32")
        # Label j of the window is the token at position start + 1 + j.
        first_new = max(0, scored_until - start)
        last = len(piece) - 1
        weight[first_new:last] = 1.0
        scored_until = max(scored_until, start + last)
        windows.append(window)
        weights.append(weight)
        start += stride
    return (np.asarray(windows, "int32").reshape(-1, span),
            np.asarray(weights, "float32").reshape(-1, sequence_length))


__all__ = [
    "BUILTIN", "CUTS", "SAMPLERS", "SPLITS", "TOKENIZERS", "builtin_files",
    "documents",
    "eval_windows", "load_files", "load_tfds", "read_text_file",
    "sentence_examples", "stream_windows", "tfds_splits",
]
