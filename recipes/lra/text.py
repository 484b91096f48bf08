"""Byte-level text classification (Long Range Arena's "Text" task).

Sources (`--dataset`):

- `builtin`: a small offline set: "reviews" of 8 to 40 sentences of the
  same sentiment drawn (seeded) from the GLUE recipe's built-in task
  (`recipes/glue/data/builtin`: its training sentences for training, its
  dev sentences for the test split), a few hundred to a few thousand bytes
  each;
- `files`: `--train_file` and `--test_file` (and optionally
  `--valid_file`), one example a line, `label<TAB>text` (UTF-8; `.gz`
  read transparently);
- `imdb_reviews`: tensorflow_datasets' IMDB reviews, LRA's choice (its
  `train` and `test` splits; needs the prepared set, a download);
- `ag_news_subset`: tensorflow_datasets' AG News, 4 classes of news, the
  text its `title`, a space and its `description` (`train` and `test`);
- `yelp_polarity_reviews`: tensorflow_datasets' Yelp reviews, 2 classes
  (`train` and `test`).

The tensorflow_datasets sets are read by one function (`tfds_splits`)
from the table `TFDS_SETS`: each set's text features (joined by a space),
label feature and splits.

The classes are the labels of the training split (sorted, numerically
where every label is an integer); an evaluation label not among them is an
error. Pure Python: no TensorFlow (tensorflow_datasets is imported for
its sets only).
"""

import os
import random

from recipes.core.data_files import DataError
from recipes.core.data_files import load_tfds_split
from recipes.glue import tasks as glue_tasks
from recipes.glue import tsv as glue_tsv
from recipes.lm import data as lm_data

BUILTIN = "builtin"
FILES = "files"
IMDB = "imdb_reviews"
AG_NEWS = "ag_news_subset"
YELP = "yelp_polarity_reviews"
# tensorflow_datasets sets: (text features joined by a space, the label
# feature, (training split, test split)).
TFDS_SETS = {
    IMDB: (("text",), "label", ("train", "test")),
    AG_NEWS: (("title", "description"), "label", ("train", "test")),
    YELP: (("text",), "label", ("train", "test")),
}
DATASETS = (BUILTIN, FILES) + tuple(TFDS_SETS)
# Sentences per built-in review.
BUILTIN_SENTENCES = (8, 40)
BUILTIN_SIZES = {"train": 600, "test": 120}


def read_labelled_file(path, what="labelled text file"):
    """The `(label, text)` pairs of a `label<TAB>text` file, one a line
    (blank lines skipped; the text may hold further tabs).

    Raises:
        DataError: naming the file and line, for a line without a tab or
            with an empty label or text (and as `lm.data.read_text_file`
            for a missing, empty, non-UTF-8 or broken `.gz` file).
    """
    text = lm_data.read_text_file(path, what)
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label, tab, body = line.partition("\t")
        if not tab or not label.strip() or not body.strip():
            raise DataError(
                f"The {what} {path}, line {number}: expected "
                f"'label<TAB>text'. Received: {line[:80]!r}")
        pairs.append((label.strip(), body))
    if not pairs:
        raise DataError(f"The {what} {path} holds no example.")
    return pairs


def builtin_splits(seed=0):
    """`{"train": pairs, "test": pairs}` of the built-in set (see the
    module docstring), the same for the same `seed`."""
    folder = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "glue", "data", "builtin")
    task = glue_tasks.get_task("builtin")
    rng = random.Random(seed)
    splits = {}
    for split, name in (("train", "train.tsv"), ("test", "dev.tsv")):
        data = glue_tsv.read_tsv(os.path.join(folder, name), task)
        by_label = {}
        for texts, label in zip(data.texts, data.labels):
            by_label.setdefault(int(label), []).append(texts[0])
        pairs = []
        for _ in range(BUILTIN_SIZES[split]):
            label = rng.choice(sorted(by_label))
            count = rng.randint(*BUILTIN_SENTENCES)
            sentences = [rng.choice(by_label[label]) for _ in range(count)]
            pairs.append((str(label), " ".join(sentences)))
        splits[split] = pairs
    return splits


def tfds_splits(name=IMDB, data_dir=None, max_examples=None):
    """`{"train": pairs, "test": pairs}` of a tensorflow_datasets set of
    `TFDS_SETS` (`imdb_reviews`, `ag_news_subset`,
    `yelp_polarity_reviews`): its text features joined by a space, its
    integer label as a string; `max_examples` keeps the first training
    examples only.

    Raises:
        ValueError: `name` is not in `TFDS_SETS`.
        DataError: the set cannot be loaded (not prepared, no network), or
            a split is empty.
    """
    if name not in TFDS_SETS:
        raise ValueError(
            f"Argument `name` must be one of {tuple(TFDS_SETS)}. "
            f"Received: name={name!r}")
    features, label_feature, split_names = TFDS_SETS[name]
    return {split: load_tfds_split(
        name, tfds_split, data_dir,
        lambda e: (str(int(e[label_feature])),
                   " ".join(_text(e[f]) for f in features)),
        "--dataset=files with --train_file/--test_file",
        max_examples if split == "train" else None)
        for split, tfds_split in zip(("train", "test"), split_names)}


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def class_names(train_pairs):
    """The classes of the training labels: sorted, numerically where every
    label is an integer."""
    labels = {label for label, _ in train_pairs}
    if all(_is_int(label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def _is_int(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def label_ids(pairs, classes, split):
    """The class index of each pair's label.

    Raises:
        DataError: a label of `split` that the training split lacks.
    """
    index = {name: i for i, name in enumerate(classes)}
    unknown = sorted({label for label, _ in pairs if label not in index})
    if unknown:
        raise DataError(
            f"The {split} split has labels the training split lacks: "
            f"{unknown[:5]} (the classes are {classes[:10]}).")
    return [index[label] for label, _ in pairs]


__all__ = ["AG_NEWS", "BUILTIN", "DATASETS", "FILES", "IMDB", "TFDS_SETS",
           "YELP", "builtin_splits",
           "class_names", "label_ids", "read_labelled_file", "tfds_splits"]
