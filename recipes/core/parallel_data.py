"""Pairs of texts of the encoder-decoder recipes (translation,
summarization, dialogue): `Parallel` (sources and their targets), the
line reader of their data files (`read_lines`: local or gs://, `.gz` by
content) and the reader of a tensorflow_datasets set's splits
(`load_tfds_splits`).

Pure Python except `load_tfds_splits` (which imports tensorflow_datasets
when called).
"""

import dataclasses
import gzip

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.core.data_files import check_data_file

SPLITS = ("train", "valid", "test")
BUILTIN = "builtin"
TFDS_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass
class Parallel:
    """Sentence pairs of one split: `src[i]` translates to `tgt[i]`.

    Attributes:
        src: source sentences (str).
        tgt: target sentences (str), the raw references.
        origin: where they were read from (for messages).
    """

    src: list
    tgt: list
    origin: str = ""

    def __post_init__(self):
        if len(self.src) != len(self.tgt):
            raise DataError(
                f"{self.origin or 'Parallel data'}: {len(self.src)} source "
                f"sentences but {len(self.tgt)} target sentences."
            )

    def __len__(self):
        return len(self.src)

    def head(self, limit):
        """The first `limit` pairs (all of them when `limit` is None)."""
        if not limit or limit >= len(self):
            return self
        return Parallel(self.src[:limit], self.tgt[:limit],
                        f"{self.origin} (first {limit})")


def read_lines(path, what="text file"):
    """Reads one sentence a line from `path` (gzipped or not, UTF-8).

    A gzipped file is recognised by its content (its name need not end in
    `.gz`). Line endings (`\\n`, `\\r\\n`) are removed; nothing else is.

    Raises:
        DataError: the file is missing, empty, or not UTF-8 text.
    """
    check_data_file(path, what)
    data = storage.read_bytes(path)
    try:
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
        text = data.decode("utf-8-sig")
    except (OSError, EOFError) as error:
        raise DataError(f"Could not read the {what} {path}: {error}") from None
    except UnicodeDecodeError as error:
        raise DataError(
            f"The {what} {path} is not UTF-8 text ({error})."
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not lines:
        raise DataError(f"The {what} {path} is empty (no lines).")
    return lines


def load_tfds_splits(full_name, src, tgt, data_dir=None,
                     files="text files"):
    """Reads the train, validation and test splits of a tensorflow_datasets
    set (those it has; train is required) as `{split: Parallel}`: the
    features `src` and `tgt` of each example. `files` names the offline
    alternative in the messages."""
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(full_name, data_dir=data_dir)
        available = set(builder.info.splits.keys())
    except Exception as error:
        raise DataError(
            f"Could not open tensorflow_datasets {full_name!r} "
            f"({type(error).__name__}: {error}). Offline, run "
            f"--dataset=builtin or pass {files}."
        ) from error
    corpus = {}
    for split, tfds_split in TFDS_SPLITS.items():
        if available and tfds_split not in available:
            continue
        try:
            dataset = tfds.load(full_name, split=tfds_split,
                                data_dir=data_dir)
        except Exception as error:  # offline, not prepared, ...
            raise DataError(
                f"Could not load tensorflow_datasets {full_name!r} split "
                f"{tfds_split!r} ({type(error).__name__}: {error}). Prepare "
                f"it with network access (tfds build), or pass {files}, "
                "or run --dataset=builtin."
            ) from error
        pairs = [(e[src].decode("utf-8"), e[tgt].decode("utf-8"))
                 for e in tfds.as_numpy(dataset)]
        if not pairs:
            raise DataError(f"tensorflow_datasets {full_name!r} split "
                            f"{tfds_split!r} is empty.")
        corpus[split] = Parallel([p[0] for p in pairs], [p[1] for p in pairs],
                                 f"tfds {full_name} {tfds_split}")
    if "train" not in corpus:
        raise DataError(f"tensorflow_datasets {full_name!r} has no train "
                        "split.")
    return corpus
