"""What translation needs from `keras_synth.models`: separate source and
target vocabularies, label-smoothed cross-entropy, detokenization that joins
punctuation, and an export that names its signature and flags cut sources."""

import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_hub
from keras_synth.models import SmoothedSparseCategoricalCrossentropy
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerTokenizer

BACKEND = keras.backend.backend()
RESERVED = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
SOURCES = ["ein hund läuft .", "eine katze schläft .", "ein mann läuft ."]
TARGETS = ["a dog runs .", "a cat sleeps .", "a man runs ."]
SOURCE_VOCAB = RESERVED + sorted({w for t in SOURCES for w in t.split()})
TARGET_VOCAB = RESERVED + sorted({w for t in TARGETS for w in t.split()}) + [
    "'", "-", ",", "t", "shirt", "##s"]
LENGTH = 8


def _np(x):
    return ops.convert_to_numpy(x)


def _preprocessor(separate=True):
    target = SynthesizerTokenizer(TARGET_VOCAB, join_punctuation=True)
    source = SynthesizerTokenizer(SOURCE_VOCAB) if separate else None
    return SynthesizerSeq2SeqLMPreprocessor(
        target, encoder_sequence_length=LENGTH,
        decoder_sequence_length=LENGTH, encoder_tokenizer=source)


def _backbone(encoder_vocabulary_size=len(SOURCE_VOCAB), seed=0):
    keras.utils.set_random_seed(seed)
    return SynthesizerSeq2SeqBackbone(
        vocabulary_size=len(TARGET_VOCAB), num_layers=1, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=LENGTH,
        synthesizer="random+vanilla", dropout=0.0,
        encoder_vocabulary_size=encoder_vocabulary_size)


def _lm():
    return SynthesizerSeq2SeqLM(_backbone(), _preprocessor())


# ------------------------------------------------- separate vocabularies


def test_source_tokenizer_packs_the_source_and_target_the_rest():
    x, y, w = _preprocessor()(
        {"encoder_text": SOURCES[:1], "decoder_text": TARGETS[:1]})
    source = [SOURCE_VOCAB.index(t) for t in SOURCES[0].split()]
    target = [TARGET_VOCAB.index(t) for t in TARGETS[0].split()]
    assert _np(x["encoder_token_ids"]).tolist() == [
        [1] + source + [2] + [0] * (LENGTH - len(source) - 2)]
    assert _np(x["encoder_padding_mask"]).tolist() == [
        [True] * (len(source) + 2) + [False] * (LENGTH - len(source) - 2)]
    assert _np(x["decoder_token_ids"]).tolist()[0][: len(target) + 1] == [
        1] + target
    assert _np(y).tolist()[0][: len(target) + 1] == target + [2]
    generate_inputs = _preprocessor().generate_preprocess(SOURCES[:1])
    np.testing.assert_array_equal(
        _np(generate_inputs["encoder_token_ids"]),
        _np(x["encoder_token_ids"]))
    # Shared: the source is tokenized with the target vocabulary.
    shared, _, _ = _preprocessor(separate=False)(
        {"encoder_text": SOURCES[:1], "decoder_text": TARGETS[:1]})
    assert _np(shared["encoder_token_ids"]).tolist()[0][1:5] == [3, 3, 3,
                                                                TARGET_VOCAB.index(".")]


def test_separate_embedding_with_equal_weights_equals_shared():
    # Same sizes, the encoder embedding a copy of the shared one: the same
    # outputs, so the separate embedding feeds the encoder and only it.
    size = len(TARGET_VOCAB)
    shared = _backbone(encoder_vocabulary_size=None)
    separate = _backbone(encoder_vocabulary_size=size)
    assert shared.encoder_token_embedding is None
    assert len(separate.weights) == len(shared.weights) + 1
    rng = np.random.default_rng(0)
    for weight in shared.weights:
        weight.assign(0.3 * rng.standard_normal(weight.shape))
    by_path = {w.path: w for w in shared.weights}
    for weight in separate.weights:
        source = by_path.get(weight.path)
        if source is None:  # the encoder's own embedding
            source = shared.token_embedding.embeddings
        weight.assign(source)
    ids = rng.integers(5, size, (2, LENGTH)).astype("int32")
    mask = np.ones((2, LENGTH), "int32")
    inputs = {"encoder_token_ids": ids, "encoder_padding_mask": mask,
              "decoder_token_ids": ids[:, ::-1], "decoder_padding_mask": mask}
    for key in ("encoder_sequence_output", "decoder_sequence_output"):
        np.testing.assert_allclose(_np(separate(inputs)[key]),
                                   _np(shared(inputs)[key]), atol=1e-5)
    # A different encoder embedding changes the encoder output.
    separate.encoder_token_embedding.embeddings.assign(
        rng.standard_normal((size, 16)))
    assert np.abs(_np(separate(inputs)["encoder_sequence_output"])
                  - _np(shared(inputs)["encoder_sequence_output"])).max() > 0.1


def test_separate_vocabularies_fit_generate_and_round_trips(tmp_path):
    lm = _lm()
    lm.compile(optimizer=keras.optimizers.Adam(1e-2),
               loss=SmoothedSparseCategoricalCrossentropy(0.1))
    data = {"encoder_text": SOURCES * 4, "decoder_text": TARGETS * 4}
    history = lm.fit(data, batch_size=4, epochs=6, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    expected = lm.generate(SOURCES)
    assert len(expected) == 3 and all(isinstance(t, str) for t in expected)
    path = os.path.join(tmp_path, "lm.keras")
    lm.save(path)
    assert keras.saving.load_model(path).generate(SOURCES) == expected
    preset = os.path.join(tmp_path, "preset")
    lm.save_to_preset(preset)
    assert os.path.isfile(os.path.join(preset, "encoder_tokenizer.json"))
    for cls in (SynthesizerSeq2SeqLM, keras_hub.models.Seq2SeqLM):
        restored = cls.from_preset(preset)
        assert restored.preprocessor.encoder_tokenizer.get_vocabulary() == (
            SOURCE_VOCAB)
        assert restored.preprocessor.tokenizer.get_vocabulary() == (
            TARGET_VOCAB)
        assert restored.backbone.encoder_vocabulary_size == len(SOURCE_VOCAB)
        assert restored.generate(SOURCES) == expected


@pytest.mark.parametrize("value", [0, -3, 2.5, "8"])
def test_bad_encoder_vocabulary_size_is_an_error(value):
    with pytest.raises(ValueError, match=r"encoder_vocabulary_size=.*"
                       + repr(value).replace(".", r"\.")):
        _backbone(encoder_vocabulary_size=value)


# ------------------------------------------------------ smoothed loss


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5])
def test_smoothed_loss_matches_numpy_and_categorical(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    labels = np.array([[1, 2, 0], [3, 0, 0]])
    weights = (labels != 0).astype("float32")
    loss = SmoothedSparseCategoricalCrossentropy(smoothing)
    value = float(_np(loss(labels, logits, weights)))
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    per_token = (1 - smoothing) * nll + smoothing * -log_p.mean(-1)
    expected = (per_token * weights).sum() / weights.sum()
    np.testing.assert_allclose(value, expected, rtol=1e-5)
    # Keras' CategoricalCrossentropy of the one-hot labels, per token.
    one_hot = np.eye(7, dtype="float32")[labels]
    categorical = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=smoothing, reduction=None)
    np.testing.assert_allclose(
        _np(SmoothedSparseCategoricalCrossentropy(
            smoothing, reduction=None)(labels, logits)),
        _np(categorical(one_hot, logits)), rtol=1e-5, atol=1e-6)


def test_smoothed_loss_config_and_bad_value():
    loss = SmoothedSparseCategoricalCrossentropy(0.2)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, SmoothedSparseCategoricalCrossentropy)
    assert restored.label_smoothing == 0.2
    assert restored.reduction == "mean_with_sample_weight"
    with pytest.raises(ValueError, match=r"label_smoothing=1\.0"):
        SmoothedSparseCategoricalCrossentropy(1.0)


# --------------------------------------------------- joined punctuation


def test_join_punctuation_in_python_and_in_graphs():
    import tensorflow as tf

    tokenizer = SynthesizerTokenizer(TARGET_VOCAB, join_punctuation=True)
    pieces = ["a", "man", "'", "##s", "t", "-", "shirt", ",", "a", "dog",
              "."]
    ids = [TARGET_VOCAB.index(p) for p in pieces]
    assert tokenizer.detokenize(ids) == "a man's t-shirt, a dog."
    assert tokenizer.detokenize([ids, ids[:2]]) == [
        "a man's t-shirt, a dog.", "a man"]
    graph = tf.function(tokenizer.detokenize)(tf.constant([ids]))
    assert graph.numpy().tolist() == [b"a man's t-shirt, a dog."]
    plain = SynthesizerTokenizer(TARGET_VOCAB)
    assert plain.detokenize(ids) == "a man 's t - shirt , a dog ."
    config = tokenizer.get_config()
    assert config["join_punctuation"] is True
    assert SynthesizerTokenizer.from_config(
        dict(config, vocabulary=TARGET_VOCAB)).join_punctuation


# ------------------------------------------------------------- export


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
def test_export_names_and_source_truncated(tmp_path):
    import tensorflow as tf

    from keras_synth.models import export_generator

    lm = _lm()
    path = export_generator(lm, os.path.join(tmp_path, "export"),
                            signature="translate", input_name="source",
                            output_name="translation")
    sources = SOURCES + ["ein hund " * 4 + "."]  # 9 tokens: cut to 6
    reloaded = tf.saved_model.load(path)
    outputs = reloaded.signatures["translate"](source=tf.constant(sources))
    assert sorted(outputs) == ["source_truncated", "translation"]
    assert outputs["source_truncated"].numpy().tolist() == [
        False, False, False, True]
    assert [t.decode() for t in outputs["translation"].numpy()] == (
        lm.generate(sources))
