"""recipes.core.vocabulary."""

import pytest

from recipes.core import data_files
from recipes.core import run_directory
from recipes.core import vocabulary
from tests.recipes.core.tensorflow_only import requires_tensorflow


def test_vocabulary_round_trip_and_checks(tmp_path):
    vocab = list(vocabulary.RESERVED_TOKENS) + ["the", "##s"]
    path = str(tmp_path / "vocab.txt")
    vocabulary.save_vocabulary(vocab, path)
    assert vocabulary.load_vocabulary(path) == vocab
    vocabulary.save_vocabulary(["[PAD]", "[CLS]", "the"], path)
    with pytest.raises(data_files.DataError,
                       match=r"lacks the reserved token"):
        vocabulary.load_vocabulary(path)
    vocabulary.save_vocabulary(
        ["the"] + list(vocabulary.RESERVED_TOKENS), path)
    with pytest.raises(data_files.DataError, match=r"must start with \[PAD\]"):
        vocabulary.load_vocabulary(path)


@requires_tensorflow
def test_learn_wordpiece_vocabulary_and_tokenize():
    texts = ["the cat sat on the mat", "the cats sat", "a dog sat"] * 20
    vocab = vocabulary.learn_wordpiece_vocabulary(texts, vocab_size=60)
    assert vocab[: len(vocabulary.RESERVED_TOKENS)] == list(
        vocabulary.RESERVED_TOKENS)
    assert "the" in vocab and "sat" in vocab
    tokenizer = vocabulary.wordpiece_tokenizer(vocab)
    ids = tokenizer(["The cat SAT zzzq"])[0]
    tokens = [vocab[int(i)] for i in ids]
    assert tokens[:3] == ["the", "cat", "sat"]
    assert vocabulary.UNK in tokens or any(t.startswith("##") for t in tokens)


@requires_tensorflow
def test_prepare_vocabulary_is_saved_and_reused(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"a": 1})
    texts = ["red green blue"] * 10
    vocab = vocabulary.prepare_vocabulary(
        run_dir, lambda: texts, vocab_size=40, log=lambda *_: None)
    assert vocabulary.load_vocabulary(run_dir.path("vocab.txt")) == vocab

    def fail():
        raise AssertionError("a saved vocabulary must not be re-learned")

    assert vocabulary.prepare_vocabulary(run_dir, fail, log=None) == vocab
    given = list(vocabulary.RESERVED_TOKENS) + ["x"]
    vocabulary.save_vocabulary(given, str(tmp_path / "given.txt"))
    other = run_directory.RunDirectory(str(tmp_path / "other"), {"a": 1})
    assert vocabulary.prepare_vocabulary(
        other, fail, vocab_file=str(tmp_path / "given.txt")) == given
