"""The language-model recipe's pure-Python parts on every backend: file
readers, the stream and sentence cuts, and evaluation windows that score
every token once."""

import gzip
import itertools

import numpy as np
import pytest

from recipes.core.data_files import DataError
from recipes.lm import data as data_lib


# ------------------------------------------------------------------ readers


def test_reads_plain_and_gzip_files_alike(tmp_path):
    text = "First Citizen:\nBefore we proceed — any further, hear me.\n"
    plain = tmp_path / "train.txt"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "train.txt.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write(text)
    assert data_lib.read_text_file(str(plain)) == text
    assert data_lib.read_text_file(str(packed)) == text


@pytest.mark.parametrize("content, match", [
    (b"", r"is empty"),
    (b"\n  \n", r"holds no text"),
    (b"caf\xe9 au lait\n", r"not UTF-8 text: byte 3 \(b'\\xe9'\)"),
])
def test_bad_files_get_clear_errors(tmp_path, content, match):
    path = tmp_path / "valid.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=match):
        data_lib.read_text_file(str(path), "valid file")


def test_empty_gzip_and_not_gzip(tmp_path):
    empty = tmp_path / "empty.txt.gz"
    with gzip.open(empty, "wb") as f:
        f.write(b"")
    with pytest.raises(DataError, match=r"holds no text"):
        data_lib.read_text_file(str(empty))
    fake = tmp_path / "fake.txt.gz"
    fake.write_bytes(b"plain text, not gzip\n")
    with pytest.raises(DataError, match=r"Could not read .*gzip"):
        data_lib.read_text_file(str(fake))
    with pytest.raises(DataError, match=r"no such file"):
        data_lib.read_text_file(str(tmp_path / "missing.txt"))


def test_load_files_needs_train_and_names_the_split(tmp_path):
    with pytest.raises(DataError, match=r"--train_file"):
        data_lib.load_files({"train": None, "valid": "x"})
    train = tmp_path / "train.txt"
    train.write_text("abc\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"valid file \(--valid_file\)"):
        data_lib.load_files({"train": str(train),
                             "valid": str(tmp_path / "nope.txt")})
    assert data_lib.load_files({"train": str(train), "valid": None}) == {
        "train": "abc\n"}


def test_builtin_corpus_is_shipped():
    corpus = data_lib.load_files(data_lib.builtin_files())
    assert sorted(corpus) == ["test", "train", "valid"]
    assert len(corpus["train"]) > 200_000
    assert "ROMEO:" in corpus["train"]
    assert corpus["valid"] != corpus["test"]


# --------------------------------------------------------------------- cuts


def test_stream_windows_by_hand():
    ids = np.arange(10)
    windows = data_lib.stream_windows(ids, 3)
    # Windows of 4 (3 inputs + the next token) every 3 tokens.
    assert windows.tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert data_lib.stream_windows(ids, 3, offset=1).tolist() == [
        [1, 2, 3, 4], [4, 5, 6, 7]]
    assert data_lib.stream_windows(ids[:3], 3).shape == (0, 4)


def test_sentence_examples_pad_and_split_long_lines():
    windows, weights = data_lib.sentence_examples(
        [[5, 6], [7, 8, 9, 10, 11]], 4, start_id=1, end_id=2)
    assert windows.tolist() == [
        [1, 5, 6, 2, 0],          # [CLS] 5 6 [SEP], padded
        [1, 7, 8, 9, 10],         # a long line: first piece ...
        [10, 11, 2, 0, 0],        # ... the rest, sharing token 10
    ]
    assert weights.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
    # Every token of every line and each end token is a label once.
    assert weights.sum() == (2 + 1) + (5 + 1)


# -------------------------------------------------------- evaluation windows


def scored_positions(windows, weights, ids):
    """The stream positions of the scored labels, from the windows alone."""
    positions = []
    for window, weight in zip(windows, weights):
        for j in np.flatnonzero(weight):
            positions.append(int(window[j + 1]))
    return positions


def test_non_overlapping_windows_by_hand():
    ids = np.arange(1, 11)  # 10 tokens: 9 are scored
    windows, weights = data_lib.eval_windows(ids, 4)
    assert windows.tolist() == [
        [1, 2, 3, 4, 5], [5, 6, 7, 8, 9], [9, 10, 0, 0, 0]]
    assert weights.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert weights.sum() == 9


def test_sliding_windows_by_hand():
    ids = np.arange(1, 9)  # 8 tokens: 7 are scored
    windows, weights = data_lib.eval_windows(ids, 4, stride=2)
    assert windows.tolist() == [
        [1, 2, 3, 4, 5], [3, 4, 5, 6, 7], [5, 6, 7, 8, 0]]
    # The first window scores 2..5; the next ones only the new labels.
    assert weights.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 1, 0]]


@pytest.mark.parametrize("n, length, stride", [
    (n, length, stride) for n, length, stride in itertools.product(
        (2, 3, 7, 16, 33), (1, 4, 8), (None, 1, 3, 4))
    if not stride or stride <= length])
def test_every_token_but_the_first_is_scored_once(n, length, stride):
    ids = np.arange(1, n + 1)  # ids are the positions + 1: unique
    windows, weights = data_lib.eval_windows(ids, length, stride)
    assert sorted(scored_positions(windows, weights, ids)) == list(
        range(2, n + 1))


def test_eval_stride_is_checked():
    with pytest.raises(ValueError, match=r"--eval_stride.*Received: "
                       r"--eval_stride=9"):
        data_lib.eval_windows(np.arange(20), 8, stride=9)


def test_tfds_text_is_one_example_a_line_and_a_failed_load_is_named(
        monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=4):
        corpus = data_lib.load_tfds("lm1b")
        few = data_lib.load_tfds("lm1b", max_examples=2)
    assert set(corpus) == set(data_lib.SPLITS)
    assert corpus["train"].count("\n") == 4
    assert few["train"].count("\n") == 2

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(DataError, match=r"'lm1b' split 'train' \(Connection"
                       r"Error: no network\).*--train_file/\.\.\."):
        data_lib.load_tfds("lm1b")


def test_tfds_splits_without_validation_halve_test():
    assert data_lib.tfds_splits("lm1b", {"train", "test"}) == {
        "train": ("train", None), "valid": ("test", 0), "test": ("test", 1)}
    assert data_lib.tfds_splits("wiki40b/en", {
        "train", "validation", "test"}) == {
        "train": ("train", None), "valid": ("validation", None),
        "test": ("test", None)}
    with pytest.raises(DataError, match=r"'x' has no train split"):
        data_lib.tfds_splits("x", {"test"})
