import keras_hub
import numpy as np
import pytest

from keras_synth.models import RESERVED_TOKENS
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import learn_wordpiece_vocabulary
from tests.models.model_utils import TEXTS

UNK = RESERVED_TOKENS.index("[UNK]")

# Punctuation inside and between words, mixed case, accents, a CJK run, a
# tab, a zero-width space (format character) and a control character: the
# learner must split and normalise as keras-hub's tokenizer does, or the
# tokenizer meets words it has no pieces for.
MIXED = [
    "Straße's café—naïve (re-run) 東京タワー!",
    "Cats\tsat,on\u200bthe MAT\u0007… «ÉTÉ» 100% ok?",
    "the cats' cafés ; the café's cats .",
] * 4


def pieces(tokenizer, vocab, text):
    return [vocab[i] for i in np.asarray(tokenizer(text)).tolist()]


def test_learned_vocabulary_tokenizes_the_text():
    vocab = learn_wordpiece_vocabulary(TEXTS * 5, 100)
    assert vocab[:5] == list(RESERVED_TOKENS)
    assert len(vocab) == len(set(vocab)) <= 100
    tokenizer = SynthesizerTokenizer(vocab)
    for text in TEXTS:
        tokens = pieces(tokenizer, vocab, text)
        assert "[UNK]" not in tokens
        assert "".join(t.removeprefix("##") for t in tokens) == "".join(
            text.split())
    # Whole words were learned, not only characters.
    assert {"the", "cast", "moving", "boring"} <= set(vocab)


@pytest.mark.parametrize("lowercase", [True, False])
def test_normalisation_and_splitting_match_keras_hub(lowercase, tmp_path):
    vocab = learn_wordpiece_vocabulary(MIXED, 400, lowercase=lowercase)
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # The vocabulary file keras-hub's own WordPieceTokenizer reads.
    tokenizer = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=str(path), lowercase=lowercase, oov_token="[UNK]",
        dtype="int32")
    assert tokenizer.get_vocabulary() == vocab
    for text in MIXED:
        tokens = pieces(tokenizer, vocab, text)
        assert "[UNK]" not in tokens, (text, tokens)
    assert ("strasse" in vocab) == lowercase
    assert ("Straße" in vocab) == (not lowercase)
    assert "東" in vocab and "##京" not in vocab  # CJK: a word a character
    assert not any("\u200b" in t or "\t" in t or "\u0007" in t
                   for t in vocab)
    assert all(len(t) == 1 for t in vocab if t in "(),;!?%…«»—")


def test_strip_accents():
    vocab = learn_wordpiece_vocabulary(MIXED, 400, strip_accents=True)
    tokenizer = SynthesizerTokenizer(vocab, strip_accents=True)
    assert "cafe" in vocab and not any("é" in t for t in vocab)
    for text in MIXED:
        assert UNK not in np.asarray(tokenizer(text)).tolist()


def test_few_unknown_pieces_on_new_text():
    vocab = learn_wordpiece_vocabulary(TEXTS * 5, 100)
    tokenizer = SynthesizerTokenizer(vocab)
    # Unseen words built from seen characters become pieces, not [UNK].
    tokens = pieces(tokenizer, vocab, "a superbly boring castle")
    assert "[UNK]" not in tokens and len(tokens) > 4
    # A character never seen in the text is unknown.
    assert pieces(tokenizer, vocab, "the zq") == ["the", "[UNK]"]


def test_deterministic():
    # The `tokenizers` trainer numbers its `##` pieces in hash-map order,
    # which changes from call to call and breaks ties between merges
    # differently; the learner fixes the order.
    texts = ["the cat sat on the mat", "the cats sat", "a dog sat"] * 20
    learned = {tuple(learn_wordpiece_vocabulary(texts, 30))
               for _ in range(10)}
    assert len(learned) == 1


@pytest.mark.parametrize("size", [0, 5, 2.5, None, True])
def test_learner_bad_size(size):
    with pytest.raises(ValueError, match="vocabulary_size"):
        learn_wordpiece_vocabulary(TEXTS, size)


def test_vocabulary_too_small_for_the_alphabet():
    with pytest.raises(ValueError, match=r"`vocabulary_size=20` is too small"
                       r" for this text: .* need \d+"):
        learn_wordpiece_vocabulary(TEXTS, 20)


def test_no_text():
    with pytest.raises(ValueError, match="`texts` is empty"):
        learn_wordpiece_vocabulary([], 100)
