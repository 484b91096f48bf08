"""Where documents and their summaries come from: the built-in task,
`document<TAB>summary` files (`--train_file`, ...) or tensorflow_datasets
(`cnn_dailymail`, the default).

Pure Python except `load_tfds` (which imports tensorflow_datasets when
called); the files are read through `recipes.core.parallel_data.read_lines`
(local or gs://, `.gz` by content).
"""

import importlib.resources
import os

from recipes.core import parallel_data
from recipes.core.data_files import DataError

SPLITS = parallel_data.SPLITS
BUILTIN = parallel_data.BUILTIN
# tensorflow_datasets features (document, summary) of known sets.
TFDS_FEATURES = {"cnn_dailymail": ("article", "highlights")}


def read_tsv(path, split="train"):
    """Reads `document<TAB>summary` lines; returns a `Parallel`.

    Raises:
        DataError: the file is missing, empty or not UTF-8, or a line has
            no TAB or an empty document or summary (naming file and line).
    """
    documents, summaries = [], []
    for number, line in enumerate(
            parallel_data.read_lines(path, f"{split} file"), 1):
        document, tab, summary = line.partition("\t")
        problem = ("no TAB" if not tab else
                   "an empty document" if not document.strip() else
                   "an empty summary" if not summary.strip() else None)
        if problem:
            raise DataError(
                f"{path}, line {number}: expected `document<TAB>summary` "
                f"(a TAB between a non-empty document and its summary), "
                f"found {problem}: {line[:80]!r}")
        documents.append(document)
        summaries.append(summary)
    return parallel_data.Parallel(documents, summaries, path)


def load_files(files):
    """`{split: path or None}` (train required) -> `{split: Parallel}`."""
    if not files.get("train"):
        raise ValueError("Argument `--train_file` is required with "
                         "`document<TAB>summary` files.")
    return {split: read_tsv(path, split) for split, path in files.items()
            if path}


def builtin_files():
    """`{split: path}` of the built-in synthetic news task."""
    root = str(importlib.resources.files("recipes.summarize") / "data"
               / "builtin")

    def path(split):
        plain = os.path.join(root, f"{split}.tsv")
        return plain + ".gz" if os.path.isfile(plain + ".gz") else plain

    return {split: path(split) for split in SPLITS}


def load_tfds(name, data_dir=None):
    """Reads a tensorflow_datasets summarization set; `{split: Parallel}`."""
    if name not in TFDS_FEATURES:
        raise ValueError(
            f"Argument `--dataset`: expected one of "
            f"{', '.join([BUILTIN, 'files', *TFDS_FEATURES])}. Received: "
            f"--dataset={name}")
    document, summary = TFDS_FEATURES[name]
    return parallel_data.load_tfds_splits(
        name, document, summary, data_dir,
        "`document<TAB>summary` files (--train_file/--valid_file/...)")
