"""Span corruption: T5's counts, the noise mask's distribution, the
preprocessor's inputs and targets (reconstruction), fit on raw strings,
determinism, errors, config and presets."""

import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_synth.models import SENTINEL_TOKEN_FORMAT
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerSpanCorruptionPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import learn_wordpiece_vocabulary
from keras_synth.models import random_spans_noise_mask
from keras_synth.models import sentinel_tokens
from keras_synth.models import span_corruption_counts
from keras_synth.models import span_corruption_lengths
from keras_synth.models import span_corruption_text_length

WORDS = ("the cat dog bird sat ran sang on in over a mat park tree sun rose "
         "hill and small big red green").split()
NUM_SENTINELS = 20
VOCAB = learn_wordpiece_vocabulary([" ".join(WORDS)], 200,
                                   num_sentinels=NUM_SENTINELS)
CLS, SEP, PAD = 1, 2, 0


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _tokenizer():
    return SynthesizerTokenizer(VOCAB)


def _random_texts(count, max_words, seed=0, min_words=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(min_words, max_words + 1)))
            for _ in range(count)]


def _t5_counts(n, density, mean):
    """T5's `random_spans_noise_mask` counts, written out again."""
    if n < 2:
        return 0, 0
    noise = min(max(int(round(n * density)), 1), n - 1)
    spans = max(int(round(noise / mean)), 1)
    return noise, min(spans, n - noise)


# ------------------------------------------------------------ lengths


@pytest.mark.parametrize("density,mean", [(0.15, 3.0), (0.5, 1.0),
                                          (0.3, 2.5), (0.9, 1.0)])
def test_counts_follow_t5_rounding(density, mean):
    for n in range(300):
        assert span_corruption_counts(n, density, mean) == _t5_counts(
            n, density, mean), n
    assert span_corruption_counts(100) == (15, 5)
    assert span_corruption_counts(10) == (2, 1)  # round(1.5) = 2, even
    assert span_corruption_counts(30) == (4, 1)  # round(4.5) = 4, even
    assert span_corruption_counts(2) == (1, 1)


def test_lengths_grow_and_text_length_inverts_them():
    previous = (0, 0)
    for n in range(1000):
        lengths = span_corruption_lengths(n)
        assert lengths[0] >= previous[0] and lengths[1] >= previous[1]
        previous = lengths
    assert span_corruption_lengths(0) == (2, 1)
    for encoder, decoder in [(512, 114), (512, None), (64, 16), (64, 4),
                             (16, 100), (3, 2), (128, 128)]:
        n = span_corruption_text_length(encoder, decoder)
        fits = [e <= encoder and (decoder is None or d <= decoder)
                for e, d in map(span_corruption_lengths, (n, n + 1))]
        assert fits == [True, False], (encoder, decoder, n)
    assert span_corruption_text_length(512) == 567
    assert span_corruption_lengths(567) == (512, 114)
    assert span_corruption_text_length(1) == 0


# ------------------------------------------------------------ the mask


def _spans(row):
    """(kept span lengths, dropped span lengths) of a bool row."""
    kept, dropped, start = [], [], 0
    for i in range(1, len(row) + 1):
        if i == len(row) or row[i] != row[start]:
            (dropped if row[start] else kept).append(i - start)
            start = i
    return kept, dropped


def test_mask_counts_alternation_and_span_length_distribution():
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(0, 120, 300), [0, 1, 2, 3]])
    seeds = rng.integers(-2**31, 2**31, (len(lengths), 2))
    mask = _np(random_spans_noise_mask(tf.constant(lengths, tf.int32),
                                       tf.constant(seeds, tf.int32)))
    assert mask.shape == (len(lengths), lengths.max())
    for row, n in zip(mask, lengths):
        assert not row[n:].any()
        noise, spans = span_corruption_counts(int(n))
        assert row[:n].sum() == noise
        kept, dropped = _spans(row[:n])
        assert len(dropped) == spans
        if n >= 2:  # kept first, dropped last, alternating (T5)
            assert not row[0] and row[n - 1] and len(kept) == spans
    # 15 dropped tokens in 5 spans: each span's length is distributed as a
    # part of a uniformly random composition of 15 into 5 parts,
    # P(j) = C(15 - j - 1, 3) / C(14, 4); the kept spans (85 into 5) too.
    count = 2000
    mask = _np(random_spans_noise_mask(
        tf.fill([count], 100),
        tf.constant(rng.integers(-2**31, 2**31, (count, 2)), tf.int32)))
    dropped = np.concatenate([_spans(row)[1] for row in mask])
    kept = np.concatenate([_spans(row)[0] for row in mask])
    assert len(dropped) == 5 * count and abs(dropped.mean() - 3.0) < 1e-9
    for lengths_, total in ((dropped, 15), (kept, 85)):
        expected = np.array([math.comb(total - j - 1, 3)
                             for j in range(1, total - 3)]) / math.comb(
                                 total - 1, 4)
        observed = np.bincount(lengths_, minlength=total)[1:total - 3] / len(
            lengths_)
        np.testing.assert_allclose(observed, expected, atol=0.015)
    # The first dropped token comes after the first kept span: 85 / 5 = 17
    # tokens on average.
    assert abs(mask.argmax(axis=1).mean() - 17.0) < 1.0


def test_mask_is_a_function_of_length_and_seed():
    lengths = tf.constant([50, 80, 50], tf.int32)
    seeds = tf.constant([[1, 2], [3, 4], [1, 2]], tf.int32)
    mask = _np(random_spans_noise_mask(lengths, seeds))
    np.testing.assert_array_equal(mask[0], mask[2])
    alone = _np(random_spans_noise_mask(lengths[:1], seeds[:1]))
    np.testing.assert_array_equal(alone[0], mask[0, :50])
    other = _np(random_spans_noise_mask(lengths[:1], seeds[1:2]))
    assert (other != alone).any()


# ------------------------------------------------------------ preprocessor


def _reconstruct(encoder_ids, labels, sentinel_ids):
    """The text's tokens from the corrupted input and the targets, and the
    sentinels of each in order of appearance."""
    sentinel_index = {s: i for i, s in enumerate(sentinel_ids)}
    assert labels[-1] == SEP
    spans, input_sentinels, target_sentinels = {}, [], []
    current = None
    for token in labels[:-1]:
        if token in sentinel_index:
            current = sentinel_index[token]
            target_sentinels.append(current)
            spans[current] = []
        else:
            spans[current].append(token)
    text = []
    for token in encoder_ids:
        if token in sentinel_index:
            input_sentinels.append(sentinel_index[token])
            text.extend(spans[sentinel_index[token]])
        else:
            text.append(token)
    return text, input_sentinels, target_sentinels, spans


@pytest.mark.parametrize("density,mean", [(0.15, 3.0), (0.4, 2.0)])
def test_reconstruction_and_format_on_many_texts(density, mean):
    tokenizer = _tokenizer()
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        tokenizer, encoder_sequence_length=48, noise_density=density,
        mean_noise_span_length=mean, seed=7)
    limit = preprocessor.max_text_length
    texts = _random_texts(200, limit, seed=1) + ["", "cat", "the cat"]
    x, y, w = preprocessor(texts)
    x = {k: _np(v) for k, v in x.items()}
    y, w = _np(y), _np(w)
    encoder_length = preprocessor.encoder_sequence_length
    decoder_length = preprocessor.decoder_sequence_length
    assert x["encoder_token_ids"].shape == (len(texts), encoder_length)
    assert x["decoder_token_ids"].shape == (len(texts), decoder_length)
    assert y.shape == w.shape == (len(texts), decoder_length)
    sentinel_ids = [tokenizer.token_to_id(t)
                    for t in sentinel_tokens(NUM_SENTINELS)]
    dropped_total = tokens_total = 0
    for i, text in enumerate(texts):
        tokens = [int(t) for t in _np(tokenizer(text))]
        noise, spans = span_corruption_counts(len(tokens), density, mean)
        encoder_ids = x["encoder_token_ids"][i]
        encoder_mask = x["encoder_padding_mask"][i]
        np.testing.assert_array_equal(encoder_mask, encoder_ids != PAD)
        content = encoder_ids[encoder_mask].tolist()
        assert content[0] == CLS and content[-1] == SEP
        assert len(content) == len(tokens) - noise + spans + 2
        # Labels: the decoder ids shifted one step; weights their mask.
        decoder_ids = x["decoder_token_ids"][i]
        decoder_mask = x["decoder_padding_mask"][i]
        np.testing.assert_array_equal(decoder_mask, decoder_ids != PAD)
        np.testing.assert_array_equal(w[i], y[i] != PAD)
        assert decoder_ids[0] == CLS
        np.testing.assert_array_equal(decoder_ids[1:][w[i][:-1]],
                                      y[i][:-1][w[i][:-1]])
        labels = y[i][w[i]].tolist()
        assert len(labels) == noise + spans + 1
        text_ids, in_order, out_order, span_tokens = _reconstruct(
            content[1:-1], labels, sentinel_ids)
        assert text_ids == tokens
        assert in_order == out_order == list(range(spans))
        if spans:
            assert labels[0] == sentinel_ids[0]
            assert all(span_tokens[s] for s in range(spans))
        dropped_total += noise
        tokens_total += len(tokens)
    assert abs(dropped_total / tokens_total - density) < 0.02


def test_determinism_batches_order_and_tf_data():
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=64, seed=3)
    texts = _random_texts(12, preprocessor.max_text_length, seed=2,
                          min_words=20)
    x, y, _ = preprocessor(texts)
    reverse_x, reverse_y, _ = preprocessor(texts[::-1])
    np.testing.assert_array_equal(_np(reverse_y)[::-1], _np(y))
    single = preprocessor(texts[4])
    np.testing.assert_array_equal(_np(single[1]), _np(y)[4])
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(5).map(
        preprocessor, num_parallel_calls=4)
    batched = np.concatenate([b[1].numpy() for b in dataset])
    np.testing.assert_array_equal(batched, _np(y))
    unbatched = tf.data.Dataset.from_tensor_slices(texts).map(preprocessor)
    np.testing.assert_array_equal(
        np.stack([b[1].numpy() for b in unbatched]), _np(y))
    other = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=64, seed=4)
    assert (_np(other(texts)[1]) != _np(y)).any()
    fresh = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=64)
    assert (_np(fresh(texts)[1]) != _np(fresh(texts)[1])).any()


def test_a_text_too_long_is_an_error_not_a_cut():
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=16, seed=0)
    limit = preprocessor.max_text_length
    fits = " ".join(["cat"] * limit)
    too_long = " ".join(["cat"] * (limit + 1))
    preprocessor([fits])
    with pytest.raises(ValueError, match=rf"longer than {limit} tokens"):
        preprocessor([fits, too_long])
    dataset = tf.data.Dataset.from_tensor_slices([too_long]).map(preprocessor)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"longer than {limit} tokens"):
        list(dataset)


def test_bad_arguments():
    tokenizer = _tokenizer()
    for density in (0, 1, 1.5, -0.1, "0.1", True):
        with pytest.raises(ValueError, match="noise_density"):
            SynthesizerSpanCorruptionPreprocessor(tokenizer,
                                                  noise_density=density)
    for mean in (0.5, 0, float("inf")):
        with pytest.raises(ValueError, match="mean_noise_span_length"):
            SynthesizerSpanCorruptionPreprocessor(
                tokenizer, mean_noise_span_length=mean)
    # 512 needs 28 sentinels; the vocabulary has 20.
    with pytest.raises(ValueError, match=r"lacks the sentinel token\(s\) "
                       r"\['\[S20\]', .*'\[S27\]'\]; .* 28 spans"):
        SynthesizerSpanCorruptionPreprocessor(tokenizer)
    plain = SynthesizerTokenizer(learn_wordpiece_vocabulary(WORDS, 100))
    with pytest.raises(ValueError, match=r"\['\[S0\]'\]"):
        SynthesizerSpanCorruptionPreprocessor(plain, encoder_sequence_length=8)
    with pytest.raises(ValueError, match="`sentinel_tokens` lists 2 tokens"):
        SynthesizerSpanCorruptionPreprocessor(
            tokenizer, encoder_sequence_length=64,
            sentinel_tokens=["[S0]", "[S1]"])
    with pytest.raises(ValueError, match="encoder_tokenizer"):
        SynthesizerSpanCorruptionPreprocessor(
            tokenizer, encoder_sequence_length=16,
            encoder_tokenizer=_tokenizer())
    with pytest.raises(ValueError, match="too short"):
        SynthesizerSpanCorruptionPreprocessor(tokenizer,
                                              encoder_sequence_length=3)
    with pytest.raises(ValueError, match="seed"):
        SynthesizerSpanCorruptionPreprocessor(tokenizer, seed=-1)
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        tokenizer, encoder_sequence_length=16)
    with pytest.raises(ValueError, match="raw strings, not a dict"):
        preprocessor({"encoder_text": ["a"], "decoder_text": ["b"]})
    with pytest.raises(ValueError, match="raw text only"):
        preprocessor(["a cat"], y=["a dog"])


def test_sentinel_tokens_and_vocabulary():
    assert SENTINEL_TOKEN_FORMAT.format(7) == "[S7]"
    assert sentinel_tokens(2) == ["[S0]", "[S1]"]
    assert VOCAB[5:5 + NUM_SENTINELS] == sentinel_tokens(NUM_SENTINELS)
    assert learn_wordpiece_vocabulary(WORDS, 100)[5] not in sentinel_tokens(1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="num_sentinels"):
            learn_wordpiece_vocabulary(WORDS, 100, num_sentinels=bad)
    with pytest.raises(ValueError, match="vocabulary_size"):
        learn_wordpiece_vocabulary(WORDS, 30, num_sentinels=30)
    # Text never tokenizes to a sentinel: WordPiece splits the brackets.
    ids = [int(i) for i in _np(_tokenizer()("[S0] cat"))]
    assert VOCAB.index("[S0]") not in ids


# ------------------------------------------------------------ training


CORPUS = ["the cat sat on the mat", "the dog ran in the park",
          "a bird sang in the tree", "the sun rose over the hill"]
PAIRS = {"encoder_text": ["the cat", "a dog"],
         "decoder_text": ["a small cat", "the big dog"]}


def _lm(encoder_sequence_length=12):
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=encoder_sequence_length, seed=0)
    keras.utils.set_random_seed(0)
    backbone = SynthesizerSeq2SeqBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=encoder_sequence_length,
        synthesizer="random", dropout=0.0)
    return SynthesizerSeq2SeqLM(backbone, preprocessor=preprocessor)


def test_fit_on_raw_strings_loss_falls():
    lm = _lm()
    lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = lm.fit(x=CORPUS * 2, batch_size=4, epochs=6, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses


def _settings(preprocessor):
    """The config without the tokenizer (an object) and the name."""
    config = preprocessor.get_config()
    return {k: v for k, v in config.items() if k not in ("tokenizer", "name")}


def test_config_round_trip():
    preprocessor = SynthesizerSpanCorruptionPreprocessor(
        _tokenizer(), encoder_sequence_length=40, decoder_sequence_length=12,
        noise_density=0.2, mean_noise_span_length=2.0,
        sentinel_tokens=sentinel_tokens(NUM_SENTINELS), seed=5)
    config = preprocessor.get_config()
    for key, value in dict(encoder_sequence_length=40,
                           decoder_sequence_length=12, noise_density=0.2,
                           mean_noise_span_length=2.0, seed=5,
                           sentinel_tokens=sentinel_tokens(NUM_SENTINELS),
                           encoder_tokenizer=None).items():
        assert config[key] == value, key
    # (A WordPiece tokenizer's config leaves its vocabulary to assets.)
    restored = SynthesizerSpanCorruptionPreprocessor.from_config(
        dict(config, tokenizer=preprocessor.tokenizer))
    assert _settings(restored) == _settings(preprocessor)
    serialized = keras.layers.deserialize(
        keras.layers.serialize(preprocessor))
    assert isinstance(serialized, SynthesizerSpanCorruptionPreprocessor)
    assert _settings(serialized) == _settings(preprocessor)
    texts = _random_texts(8, preprocessor.max_text_length, seed=3)
    for a, b in zip(keras.tree.flatten(preprocessor(texts)),
                    keras.tree.flatten(restored(texts))):
        np.testing.assert_array_equal(_np(a), _np(b))


def test_preset_then_fine_tuning_on_translation(tmp_path):
    lm = _lm()
    preset = os.path.join(tmp_path, "pretrained")
    lm.save_to_preset(preset)
    # Pretraining resumes: the task comes back with the span preprocessor.
    resumed = SynthesizerSeq2SeqLM.from_preset(preset)
    assert isinstance(resumed.preprocessor,
                      SynthesizerSpanCorruptionPreprocessor)
    assert _settings(resumed.preprocessor) == _settings(lm.preprocessor)
    # Fine-tuning starts from the backbone and the tokenizer.
    backbone = SynthesizerSeq2SeqBackbone.from_preset(preset)
    for a, b in zip(backbone.get_weights(), lm.backbone.get_weights()):
        np.testing.assert_array_equal(a, b)
    tokenizer = SynthesizerTokenizer.from_preset(preset)
    assert tokenizer.get_vocabulary() == VOCAB
    translation = SynthesizerSeq2SeqLMPreprocessor(
        tokenizer, encoder_sequence_length=12, decoder_sequence_length=12)
    fine_tuned = SynthesizerSeq2SeqLM(backbone, translation)
    fine_tuned.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = fine_tuned.fit(PAIRS, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    # Or in one call: from_preset with a translation preprocessor.
    task = SynthesizerSeq2SeqLM.from_preset(preset, preprocessor=translation)
    assert task.preprocessor is translation
