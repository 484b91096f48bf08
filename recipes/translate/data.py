"""Where parallel text comes from: the built-in task, plain parallel text
files (`--train_src`, ...) or `tensorflow_datasets` (the default).

Pure Python except `load_tfds` (which imports tensorflow_datasets when
called): the readers and checks work on every Keras backend. `Parallel`,
`read_lines` and `load_tfds_splits` are `recipes.core.parallel_data`'s.
"""

import importlib.resources
import os
import re

from recipes.core.data_files import DataError
from recipes.core.parallel_data import BUILTIN
from recipes.core.parallel_data import SPLITS
from recipes.core.parallel_data import Parallel
from recipes.core.parallel_data import load_tfds_splits
from recipes.core.parallel_data import read_lines

BUILTIN_LANGUAGES = ("de", "en")
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")


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
