import re

import numpy as np
import pytest

from keras_synth.models import RESERVED_TOKENS
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from tests.models.model_utils import VOCAB


def ids(x):
    return [int(i) for i in np.asarray(x)]


def test_special_token_ids_and_unknown_words():
    tokenizer = SynthesizerTokenizer(VOCAB)
    assert (tokenizer.pad_token_id, tokenizer.start_token_id,
            tokenizer.end_token_id) == (0, 1, 2)
    assert tokenizer.id_to_token(3) == "[UNK]"
    got = ids(tokenizer("The plot is ZANY ."))
    assert got == [VOCAB.index(w) for w in ("the", "plot", "is")] + [
        3, VOCAB.index(".")]


def test_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = SynthesizerTokenizer(str(path))
    assert tokenizer.get_vocabulary() == VOCAB


@pytest.mark.parametrize("missing", RESERVED_TOKENS)
def test_vocabulary_without_a_reserved_token(missing, tmp_path):
    vocab = [t for t in VOCAB if t != missing]
    with pytest.raises(ValueError, match=r"vocabulary.*lacks the reserved "
                       r"token\(s\) " + re.escape(str([missing]))):
        SynthesizerTokenizer(vocab)
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab), encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt' lacks"):
        SynthesizerTokenizer(str(path))


def test_preprocessor_packs_single_sentences_and_pairs():
    preprocessor = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=9)
    cls, sep = 1, 2
    the, plot, dull, cast = (VOCAB.index(w)
                             for w in ("the", "plot", "dull", "cast"))
    x = preprocessor(["the plot", "dull"])
    np.testing.assert_array_equal(
        np.asarray(x["token_ids"]),
        [[cls, the, plot, sep, 0, 0, 0, 0, 0],
         [cls, dull, sep, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(np.asarray(x["padding_mask"]),
                                  np.asarray(x["token_ids"]) != 0)
    np.testing.assert_array_equal(np.asarray(x["segment_ids"]), 0)
    x, y = preprocessor(x=(["the plot"], ["the cast"]), y=np.array([1.5]))
    np.testing.assert_array_equal(
        np.asarray(x["token_ids"]),
        [[cls, the, plot, sep, the, cast, sep, 0, 0]])
    np.testing.assert_array_equal(np.asarray(x["segment_ids"]),
                                  [[0, 0, 0, 0, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(np.asarray(y), [1.5])  # regression
    # Round-robin truncation.
    x = preprocessor(x=(["the plot the plot the plot"], ["the cast the cast"]))
    np.testing.assert_array_equal(
        np.asarray(x["token_ids"]),
        [[cls, the, plot, the, sep, the, cast, the, sep]])


@pytest.mark.parametrize("length", [2, 0, "8"])
def test_preprocessor_bad_sequence_length(length):
    with pytest.raises(ValueError, match="sequence_length"):
        SynthesizerTextClassifierPreprocessor(SynthesizerTokenizer(VOCAB),
                                              sequence_length=length)
