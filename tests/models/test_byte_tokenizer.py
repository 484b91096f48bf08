"""`SynthesizerByteTokenizer`: UTF-8 bytes after the reserved tokens, in
Python and TensorFlow, config, `.keras` and preset round trips."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_hub
from keras_synth.models import SynthesizerByteTokenizer
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models.tokenizers import byte_tokenizer

TEXTS = ["Ça va — très bien, 東京!\n", "ROMEO: who is there?", ""]


def _expected(text):
    return [4 + b for b in text.encode("utf-8")]


def test_ids_are_the_bytes_after_the_reserved_tokens():
    tokenizer = SynthesizerByteTokenizer()
    assert tokenizer.vocabulary_size() == 260
    assert tokenizer.get_vocabulary()[:5] == ["[PAD]", "[CLS]", "[SEP]",
                                              "[UNK]", "\x00"]
    assert (tokenizer.pad_token_id, tokenizer.start_token_id,
            tokenizer.end_token_id, tokenizer.oov_token_id) == (0, 1, 2, 3)
    assert tokenizer(TEXTS) == [_expected(t) for t in TEXTS]
    assert tokenizer(TEXTS[0]).tolist() == _expected(TEXTS[0])
    assert tokenizer(TEXTS[0]).dtype == np.int32
    assert tokenizer(TEXTS[0].encode("utf-8")).tolist() == _expected(
        TEXTS[0])
    # A reserved token's spelling is text like any other.
    assert tokenizer("[PAD]").tolist() == _expected("[PAD]")


def test_python_and_tensorflow_paths_agree_and_round_trip():
    tokenizer = SynthesizerByteTokenizer()
    graph = tf.function(tokenizer.tokenize)(tf.constant(TEXTS))
    assert graph.to_list() == [_expected(t) for t in TEXTS]
    assert tokenizer(tf.constant(TEXTS[1])).numpy().tolist() == _expected(
        TEXTS[1])
    ids = tokenizer(TEXTS)
    assert tokenizer.detokenize(ids) == TEXTS
    assert tokenizer.detokenize(np.array(ids[1])) == TEXTS[1]
    text = tf.function(tokenizer.detokenize)(tf.ragged.constant(ids))
    assert [t.decode("utf-8") for t in text.numpy()] == TEXTS
    assert tokenizer.detokenize(tf.constant(ids[1])).numpy().decode() == (
        TEXTS[1])


def test_cut_characters_and_reserved_ids_when_detokenizing():
    tokenizer = SynthesizerByteTokenizer()
    ids = _expected("東")  # three bytes
    # A character cut in half decodes to U+FFFD, not an error, both ways.
    assert tokenizer.detokenize(ids[:2]) == "\ufffd"
    assert tokenizer.detokenize(tf.constant(ids[:2])).numpy().decode() == (
        "\ufffd")
    # [CLS] ... [SEP] and padding spell nothing.
    assert tokenizer.detokenize([1] + _expected("ab") + [2, 0, 0]) == "ab"
    with pytest.raises(ValueError, match=r"ids in \[0, 259\]. Received: "
                                         r"\[260, -1\]"):
        tokenizer.detokenize([5, 260, -1])


def test_bad_arguments():
    with pytest.raises(ValueError, match="lowercase=True"):
        SynthesizerByteTokenizer(lowercase=True)
    vocabulary = byte_tokenizer.byte_vocabulary()
    vocabulary[10] = "東"
    with pytest.raises(ValueError, match=r"differing at index 10: '東'"):
        SynthesizerByteTokenizer(vocabulary=vocabulary)
    with pytest.raises(ValueError, match="Received 259 tokens"):
        SynthesizerByteTokenizer(
            vocabulary=byte_tokenizer.byte_vocabulary()[:-1])
    # The byte vocabulary itself is accepted (a saved one given back).
    given = SynthesizerByteTokenizer(
        vocabulary=byte_tokenizer.byte_vocabulary())
    assert given("é").tolist() == [199, 173]


def test_config_and_assets_round_trip(tmp_path):
    tokenizer = SynthesizerByteTokenizer(name="bytes")
    config = tokenizer.get_config()
    assert "vocabulary" not in config and "lowercase" not in config
    restored = SynthesizerByteTokenizer.from_config(config)
    assert restored.name == "bytes"
    assert restored(TEXTS) == tokenizer(TEXTS)
    serialized = keras.saving.serialize_keras_object(tokenizer)
    assert serialized["registered_name"] == (
        "keras_synth>SynthesizerByteTokenizer")
    assert isinstance(keras.saving.deserialize_keras_object(serialized),
                      SynthesizerByteTokenizer)
    tokenizer.save_assets(str(tmp_path))
    restored.load_assets(str(tmp_path))
    assert restored.get_vocabulary() == tokenizer.get_vocabulary()
    # An asset that is not the byte vocabulary is refused.
    (tmp_path / "vocabulary.json").write_text('["[PAD]", "[CLS]", "[SEP]", '
                                              '"[UNK]", "a"]')
    with pytest.raises(ValueError, match="must be the byte vocabulary"):
        restored.load_assets(str(tmp_path))


def _lm():
    keras.utils.set_random_seed(0)
    tokenizer = SynthesizerByteTokenizer()
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
        num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=12, synthesizer="random+vanilla", dropout=0.0)
    rng = np.random.default_rng(1)
    for weight in backbone.weights:  # peaked logits: a telling generation
        weight.assign(0.3 * rng.standard_normal(weight.shape))
    preprocessor = SynthesizerCausalLMPreprocessor(tokenizer,
                                                   sequence_length=12)
    return SynthesizerCausalLM(backbone, preprocessor)


def test_preset_and_keras_file_round_trip(tmp_path):
    lm = _lm()
    expected = lm.generate(["ROMEO:", "東"], max_length=10)
    preset = str(tmp_path / "preset")
    lm.save_to_preset(preset)
    for cls in (SynthesizerCausalLM, keras_hub.models.CausalLM):
        restored = cls.from_preset(preset)
        assert isinstance(restored.preprocessor.tokenizer,
                          SynthesizerByteTokenizer)
        assert restored.generate(["ROMEO:", "東"], max_length=10) == expected
    with open(os.path.join(preset, "tokenizer.json")) as f:
        assert "keras_synth>SynthesizerByteTokenizer" in f.read()
    path = os.path.join(tmp_path, "lm.keras")
    lm.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored.preprocessor.tokenizer,
                      SynthesizerByteTokenizer)
    assert restored.generate(["ROMEO:", "東"], max_length=10) == expected


def test_in_a_tf_data_pipeline():
    preprocessor = SynthesizerCausalLMPreprocessor(SynthesizerByteTokenizer(),
                                                   sequence_length=8)
    dataset = tf.data.Dataset.from_tensor_slices(["héllo", "ab"]).batch(2)
    x, y, _ = next(iter(dataset.map(preprocessor)))
    eager_x, eager_y, _ = preprocessor(["héllo", "ab"])
    np.testing.assert_array_equal(x["token_ids"], eager_x["token_ids"])
    np.testing.assert_array_equal(y, eager_y)
    # [CLS] h é(2 bytes) l l o [SEP], padded.
    assert keras.ops.convert_to_numpy(eager_x["token_ids"])[0].tolist() == (
        [1] + _expected("héllo") + [2])
