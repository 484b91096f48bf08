"""Where parallel text comes from: the built-in task, plain parallel text
files (`--train_src`, ...) or `tensorflow_datasets` (the default).

Pure Python except `load_tfds` (which imports tensorflow_datasets when
called): the readers and checks work on every Keras backend.
"""

import dataclasses
import gzip
import importlib.resources
import os
import re

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.core.data_files import check_data_file

SPLITS = ("train", "valid", "test")
BUILTIN = "builtin"
BUILTIN_LANGUAGES = ("de", "en")
TFDS_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")
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


def check_language(flag, value):
    """Returns `value` if it is a language code such as `de`, `en`, `fr`."""
    if not isinstance(value, str) or not _LANGUAGE.match(value):
        raise ValueError(
            f"Argument `--{flag}` must be a 2 or 3 letter lowercase language "
            f"code such as 'de', 'en' or 'fr'. Received: --{flag}={value!r}"
        )
    return value


def check_language_pair(src, tgt):
    check_language("src", src)
    check_language("tgt", tgt)
    if src == tgt:
        raise ValueError(
            f"Arguments `--src` and `--tgt` must differ. Received: "
            f"--src={src} --tgt={tgt}"
        )


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


def read_parallel(src_path, tgt_path, split="train"):
    """Reads a pair of parallel files; line i of one translates line i of
    the other.

    Raises:
        DataError: a file is missing or empty, or the line counts differ.
    """
    src = read_lines(src_path, f"{split} source file")
    tgt = read_lines(tgt_path, f"{split} target file")
    if len(src) != len(tgt):
        raise DataError(
            f"The {split} files have different line counts: {src_path} has "
            f"{len(src)} lines, {tgt_path} has {len(tgt)}. Parallel files "
            "need one sentence a line, line i of one translating line i of "
            "the other."
        )
    return Parallel(src, tgt, f"{src_path} / {tgt_path}")


def builtin_dir():
    """The folder of the built-in task (package data of `recipes.translate`)."""
    return str(importlib.resources.files("recipes.translate") / "data"
               / "builtin")


def builtin_files(src, tgt):
    """`{split: (src_path, tgt_path)}` of the built-in German-English task."""
    for flag, language in (("src", src), ("tgt", tgt)):
        if language not in BUILTIN_LANGUAGES:
            raise ValueError(
                f"The built-in task is German-English: argument `--{flag}` "
                f"must be one of {BUILTIN_LANGUAGES}. Received: "
                f"--{flag}={language}"
            )
    root = builtin_dir()

    def path(split, language):
        name = f"{split}.{language}"
        gz = os.path.join(root, name + ".gz")
        return gz if os.path.isfile(gz) else os.path.join(root, name)

    return {split: (path(split, src), path(split, tgt)) for split in SPLITS}


def load_files(files):
    """Reads `{split: (src_path, tgt_path)}`; returns `{split: Parallel}`.

    `train` is required. A split whose two paths are `None` is skipped; one
    path without the other is an error.
    """
    corpus = {}
    for split in SPLITS:
        src_path, tgt_path = files.get(split, (None, None))
        if src_path is None and tgt_path is None:
            continue
        if src_path is None or tgt_path is None:
            given, missing = (("src", "tgt") if tgt_path is None
                              else ("tgt", "src"))
            raise ValueError(
                f"Argument `--{split}_{given}` needs `--{split}_{missing}` "
                f"(the other side of the parallel {split} files)."
            )
        corpus[split] = read_parallel(src_path, tgt_path, split)
    if "train" not in corpus:
        raise ValueError(
            "Arguments `--train_src` and `--train_tgt` are required with "
            "parallel text files."
        )
    return corpus


def tfds_config(name, src, tgt):
    """The tensorflow_datasets config of `name` for the pair (`de-en`, ...).

    Raises:
        ValueError: `name` is not a translation dataset, or has no config
            for these languages (the message lists those it has).
    """
    import tensorflow_datasets as tfds

    from recipes.cli import suggestion

    try:
        builder_cls = tfds.builder_cls(name)
    except Exception:
        try:
            known = [BUILTIN] + list(tfds.list_builders())
        except Exception:  # pragma: no cover - a broken registry
            known = [BUILTIN, "wmt14_translate"]
        raise ValueError(
            f"Argument `--dataset`: unknown tensorflow_datasets dataset "
            f"{name!r}. Expected a translation dataset such as "
            "'wmt14_translate', 'builtin', or parallel text files "
            "(--train_src/--train_tgt)." + suggestion(name, known)
        ) from None
    configs = [c.name for c in getattr(builder_cls, "BUILDER_CONFIGS", [])]
    for candidate in (f"{src}-{tgt}", f"{tgt}-{src}"):
        if candidate in configs:
            return candidate
    raise ValueError(
        f"tensorflow_datasets {name!r} has no {src}-{tgt} pair (arguments "
        f"`--src={src}`, `--tgt={tgt}`). Its pairs: {configs}."
    )


def load_tfds(name, src, tgt, data_dir=None):
    """Reads a tensorflow_datasets translation set; `{split: Parallel}`."""
    config = tfds_config(name, src, tgt)
    return load_tfds_splits(f"{name}/{config}", src, tgt, data_dir,
                            "parallel text files (--train_src/--train_tgt/...)")


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
