"""`SynthesizerCharTokenizer`: learned character vocabulary, Python and TF."""

import numpy as np
import pytest
import tensorflow as tf

from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models import SynthesizerCharTokenizer

TEXT = "First Citizen:\nBefore we proceed, hear me speak.\n"


def _tokenizer(**kwargs):
    return SynthesizerCharTokenizer(
        SynthesizerCharTokenizer.learn_vocabulary([TEXT]), **kwargs
    )


def test_learned_vocabulary():
    vocabulary = SynthesizerCharTokenizer.learn_vocabulary(["abba c"])
    assert vocabulary == ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "a", "b", " ",
                          "c"]
    capped = SynthesizerCharTokenizer.learn_vocabulary(["abba c"],
                                                       max_vocabulary_size=6)
    assert capped == vocabulary[:6]
    lower = SynthesizerCharTokenizer.learn_vocabulary(["AaB"], lowercase=True)
    assert lower == ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "a", "b"]
    with pytest.raises(ValueError, match="max_vocabulary_size=3"):
        SynthesizerCharTokenizer.learn_vocabulary(["a"], max_vocabulary_size=3)


def test_python_and_tensorflow_paths_agree_and_round_trip():
    tokenizer = _tokenizer()
    texts = [TEXT, "Zebra!", ""]  # "Z", "!" are not in the vocabulary
    python = tokenizer(texts)
    graph = tf.function(tokenizer.tokenize)(tf.constant(texts))
    assert python == graph.to_list()
    vocabulary = tokenizer.get_vocabulary()
    expected = [[vocabulary.index(c) if c in vocabulary else 3 for c in t]
                for t in texts]
    assert python == expected
    assert tokenizer.detokenize(python[0]) == TEXT  # newlines included
    unknown = "".join(c if c in vocabulary else "[UNK]" for c in "Zebra!")
    assert unknown.startswith("[UNK]") and unknown.endswith("[UNK]")
    assert tokenizer.detokenize(python) == [TEXT, unknown, ""]
    graph_text = tf.function(tokenizer.detokenize)(tf.ragged.constant(python))
    assert [s.decode() for s in graph_text.numpy()] == tokenizer.detokenize(
        python)


def test_reserved_strings_in_text_are_not_special():
    tokenizer = _tokenizer()
    ids = tokenizer("[PAD]")
    assert 0 not in list(ids)  # "[", "P", ... one character each


def test_lowercase():
    tokenizer = SynthesizerCharTokenizer(
        SynthesizerCharTokenizer.learn_vocabulary(["ab"]), lowercase=True)
    assert list(tokenizer("AB")) == list(tokenizer("ab"))


def test_special_tokens():
    tokenizer = _tokenizer()
    assert (tokenizer.pad_token_id, tokenizer.start_token_id,
            tokenizer.end_token_id, tokenizer.oov_token_id) == (0, 1, 2, 3)
    assert sorted(tokenizer.special_token_ids) == [0, 1, 2, 3]


def test_bad_vocabularies():
    with pytest.raises(ValueError, match=r"lacks the reserved token\(s\) "
                                         r"\['\[UNK\]'\]"):
        SynthesizerCharTokenizer(["[PAD]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="must start with '\\[PAD\\]'"):
        SynthesizerCharTokenizer(["a", "[PAD]", "[CLS]", "[SEP]", "[UNK]"])
    with pytest.raises(ValueError, match="single characters"):
        SynthesizerCharTokenizer(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "ab"])
    with pytest.raises(ValueError, match="No vocabulary"):
        SynthesizerCharTokenizer()("a")


def test_assets_and_config_round_trip(tmp_path):
    tokenizer = _tokenizer(lowercase=True)
    tokenizer.save_assets(str(tmp_path))
    restored = SynthesizerCharTokenizer(lowercase=True)
    restored.load_assets(str(tmp_path))
    assert restored.get_vocabulary() == tokenizer.get_vocabulary()
    from_config = SynthesizerCharTokenizer.from_config(tokenizer.get_config())
    assert from_config(TEXT).tolist() == tokenizer(TEXT).tolist()


def test_in_a_tf_data_pipeline():
    preprocessor = SynthesizerCausalLMPreprocessor(_tokenizer(),
                                                   sequence_length=8)
    dataset = tf.data.Dataset.from_tensor_slices([TEXT, "hear"]).batch(2)
    x, y, w = next(iter(dataset.map(preprocessor)))
    eager_x, eager_y, _ = preprocessor([TEXT, "hear"])
    np.testing.assert_array_equal(x["token_ids"], eager_x["token_ids"])
    np.testing.assert_array_equal(y, eager_y)


def _char_lm_preset(tmp_path, tokenizer):
    from keras_synth.models import SynthesizerCausalLM
    from keras_synth.models import SynthesizerCausalLMBackbone

    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
        num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=16)
    preprocessor = SynthesizerCausalLMPreprocessor(tokenizer,
                                                   sequence_length=16)
    path = str(tmp_path / "preset")
    SynthesizerCausalLM(backbone, preprocessor).save_to_preset(path)
    return path


def test_from_preset_of_a_causal_lm(tmp_path):
    from keras_synth.models import SynthesizerByteTokenizer
    from keras_synth.models import SynthesizerTokenizer

    tokenizer = _tokenizer()
    path = _char_lm_preset(tmp_path, tokenizer)
    loaded = SynthesizerCharTokenizer.from_preset(path)
    assert type(loaded) is SynthesizerCharTokenizer
    assert loaded.get_vocabulary() == tokenizer.get_vocabulary()
    assert loaded([TEXT]) == tokenizer([TEXT])
    for other in (SynthesizerByteTokenizer, SynthesizerTokenizer):
        with pytest.raises(ValueError, match=(
                f"holds a SynthesizerCharTokenizer .*tokenizer.json.*, not a "
                f"{other.__name__}. Load it with "
                r"`SynthesizerCharTokenizer.from_preset`.")):
            other.from_preset(path)
    # A byte tokenizer's preset loads from the character tokenizer's class
    # (its base) as what it is.
    byte_path = _char_lm_preset(tmp_path / "bytes", SynthesizerByteTokenizer())
    assert type(SynthesizerCharTokenizer.from_preset(byte_path)) is (
        SynthesizerByteTokenizer)
