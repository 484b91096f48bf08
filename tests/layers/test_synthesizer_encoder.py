"""`SynthesizerEncoder`: a keras-nlp `TransformerEncoder` with synthesized attention."""

import functools
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import SynthesizerEncoder
import keras_hub
from tests.backend_utils import gradients
from tests.layers import layer_harness as harness

VARIANTS = list(harness.ALL_VARIANTS)
B, T, D, HEADS, FFN, MAX_LEN, RANK = 2, 6, 16, 2, 24, 8, 3
RANK_OPTIONS = {"factorized_random": {"rank": RANK}}
K = D // HEADS
TOL = dict(atol=1e-5, rtol=1e-5)
GRADIENT_VARIANTS = {"fixed_random", "factorized_dense", "factorized_random",
                     "random+vanilla", "dense+vanilla"}


def _np(x):
    return ops.convert_to_numpy(x)


def _encoder(variant, normalize_first=False, **kwargs):
    layer = SynthesizerEncoder(
        intermediate_dim=FFN, num_heads=HEADS, synthesizer=variant,
        max_length=MAX_LEN, normalize_first=normalize_first,
        synthesizer_options=kwargs.pop("synthesizer_options", RANK_OPTIONS),
        **kwargs,
    )
    layer.build((B, T, D))
    harness.randomize(layer)
    return layer


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, D)).astype("float32")
    padding = np.arange(T)[None, :] < np.array([[T], [4]])
    return x, padding


def _clone(layer):
    clone = layer.__class__.from_config(layer.get_config())
    return clone


_logit_path_params = functools.partial(
    harness.logit_path_params, d=D, heads=HEADS, k=K, length=MAX_LEN, rank=RANK
)


def _keras_nlp_encoder(normalize_first=False):
    layer = keras_hub.layers.TransformerEncoder(
        intermediate_dim=FFN, num_heads=HEADS,
        normalize_first=normalize_first,
    )
    layer.build((B, T, D))
    return layer


# ----------------------------------------------------------------- identity


def test_is_a_keras_nlp_transformer_encoder():
    layer = SynthesizerEncoder(intermediate_dim=8, num_heads=2,
                               synthesizer="random", max_length=8)
    assert isinstance(layer, keras_hub.layers.TransformerEncoder)


@pytest.mark.parametrize("variant", VARIANTS)
def test_parameter_count_and_no_dead_weights(variant):
    layer = _encoder(variant)
    reference = _keras_nlp_encoder()
    dot_product = 2 * (D * HEADS * K + HEADS * K)
    expected = (reference.count_params() - dot_product
                + _logit_path_params(variant))
    assert layer.count_params() == expected
    # Only the attention's own weights, none of keras-nlp's MHA.
    attention_weights = {id(w) for w in layer.self_attention.weights}
    assert isinstance(layer.self_attention, SynthesizerAttention)
    assert not any(
        isinstance(sub, keras.layers.MultiHeadAttention)
        for sub in layer._flatten_layers()
    )
    frozen = [w for w in layer.weights if not w.trainable]
    assert len(frozen) == (1 if "fixed_random" in variant else 0)
    assert len(attention_weights) > 0
    paths = [w.path for w in layer.weights]
    assert len(paths) == len(set(paths))
    if "vanilla" not in variant:
        assert not any("query" in p or "/key/" in p for p in paths)
    # Every trainable weight is used: it gets a non-zero gradient (checked
    # where each component's weights appear once: mixtures cover D, R, V).
    if variant not in GRADIENT_VARIANTS:
        return
    x, padding = _inputs()
    grads = gradients(
        lambda: ops.sum(ops.square(layer(x, padding_mask=padding))),
        layer.trainable_weights,
    )
    for weight, grad in zip(layer.trainable_weights, grads):
        assert np.any(grad != 0), weight.path


# ----------------------------------------------------------------- outputs


def _copy_keras_nlp_weights(ours, theirs):
    mha = theirs._self_attention_layer
    vanilla = ours.self_attention.synthesizers[0]
    pairs = [
        (vanilla.query_dense, mha._query_dense),
        (vanilla.key_dense, mha._key_dense),
        (ours.self_attention.value_dense, mha._value_dense),
        (ours.self_attention.output_dense, mha._output_dense),
    ]
    for name in ("_self_attention_layer_norm", "_feedforward_layer_norm",
                 "_feedforward_intermediate_dense",
                 "_feedforward_output_dense"):
        pairs.append((getattr(ours, name), getattr(theirs, name)))
    for mine, other in pairs:
        mine.set_weights(other.get_weights())


@pytest.mark.parametrize("normalize_first", [False, True])
def test_vanilla_equals_keras_nlp_encoder(normalize_first):
    theirs = _keras_nlp_encoder(normalize_first)
    harness.randomize(theirs, seed=5)
    ours = _encoder("vanilla", normalize_first=normalize_first)
    _copy_keras_nlp_weights(ours, theirs)
    x, padding = _inputs()
    np.testing.assert_allclose(_np(ours(x)), _np(theirs(x)), **TOL)
    attention = np.random.default_rng(3).random((B, T, T)) > 0.3
    attention[:, :, 0] = True  # no fully masked query row
    for kwargs in ({"padding_mask": padding}, {"attention_mask": attention},
                   {"padding_mask": padding, "attention_mask": attention}):
        np.testing.assert_allclose(
            _np(ours(x, **kwargs)), _np(theirs(x, **kwargs)), **TOL
        )
    y, scores = ours(x, padding_mask=padding, return_attention_scores=True)
    y_ref, scores_ref = theirs(x, padding_mask=padding,
                               return_attention_scores=True)
    np.testing.assert_allclose(_np(y), _np(y_ref), **TOL)
    np.testing.assert_allclose(_np(scores), _np(scores_ref), **TOL)


def _hand_assembled(block, x, value_mask=None, attention_mask=None):
    """The block from a standalone SynthesizerAttention and Keras layers."""
    x = ops.convert_to_tensor(x)
    attention = _clone(block.self_attention)
    attention.build(x.shape, x.shape)
    attention.set_weights(block.self_attention.get_weights())
    ln1 = keras.layers.LayerNormalization(epsilon=block.layer_norm_epsilon)
    ln2 = keras.layers.LayerNormalization(epsilon=block.layer_norm_epsilon)
    ffn1 = keras.layers.Dense(block.intermediate_dim,
                              activation=block.activation)
    ffn2 = keras.layers.Dense(x.shape[-1])
    for mine, name in ((ln1, "_self_attention_layer_norm"),
                       (ln2, "_feedforward_layer_norm"),
                       (ffn1, "_feedforward_intermediate_dense"),
                       (ffn2, "_feedforward_output_dense")):
        width = (block.intermediate_dim
                 if name == "_feedforward_output_dense" else x.shape[-1])
        mine.build((None, None, width))
        mine.set_weights(getattr(block, name).get_weights())
    h = x
    if block.normalize_first:
        h = ln1(h)
    h = attention(h, h, value_mask=value_mask, attention_mask=attention_mask)
    h = h + x
    if not block.normalize_first:
        h = ln1(h)
    residual = h
    if block.normalize_first:
        h = ln2(h)
    h = ffn2(ffn1(h)) + residual
    if not block.normalize_first:
        h = ln2(h)
    return _np(h)


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_equals_hand_assembled_block(variant):
    block = _encoder(variant, normalize_first=variant == "random")
    x, padding = _inputs()
    np.testing.assert_allclose(_np(block(x)), _hand_assembled(block, x),
                               **TOL)
    np.testing.assert_allclose(
        _np(block(x, padding_mask=padding)),
        _hand_assembled(block, x, value_mask=padding), **TOL,
    )
    attention = np.random.default_rng(4).random((B, T, T)) > 0.4
    np.testing.assert_allclose(
        _np(block(x, padding_mask=padding, attention_mask=attention)),
        _hand_assembled(block, x, value_mask=padding,
                        attention_mask=attention),
        **TOL,
    )


@pytest.mark.parametrize("variant", ["random", "dense+vanilla"])
def test_padded_keys_get_no_attention_and_keras_masks_work(variant):
    block = _encoder(variant)
    tokens = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 0, 0, 0]])
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    x = embedding(tokens)
    padding = tokens != 0
    y, scores = block(x, return_attention_scores=True)
    assert np.all(_np(scores)[1, :, :, 3:] == 0)
    # The Keras mask gives the explicit padding mask's result ...
    y_explicit = block(ops.convert_to_tensor(_np(x)), padding_mask=padding)
    np.testing.assert_allclose(_np(y), _np(y_explicit), **TOL)
    # ... is passed on to the next layer, and the input keeps its mask.
    np.testing.assert_array_equal(_np(y._keras_mask), padding)
    np.testing.assert_array_equal(_np(x._keras_mask), padding)
    # Padded positions do not change the outputs of real tokens.
    x2 = _np(x).copy()
    x2[1, 3:] = 7.0
    y2 = block(x2, padding_mask=padding)
    np.testing.assert_allclose(_np(y2)[1, :3], _np(y)[1, :3], **TOL)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="max_length"):
        SynthesizerEncoder(intermediate_dim=8, num_heads=2,
                           synthesizer="random")
    with pytest.raises(ValueError, match="synthesizer"):
        SynthesizerEncoder(intermediate_dim=8, num_heads=2,
                           synthesizer="gaussian", max_length=8)
    block = _encoder("random")
    with pytest.raises(ValueError, match="max_length"):
        block(np.zeros((1, MAX_LEN + 1, D), "float32"))
    with pytest.raises(ValueError, match="padding_mask"):
        block(np.zeros((1, T, D), "float32"),
              padding_mask=np.ones((1, T, 1), bool))


# ----------------------------------------------------------- serialization


@pytest.mark.parametrize("variant", ["dense", "fixed_random",
                                     "factorized_random+vanilla"])
def test_config_and_keras_round_trip(variant, tmp_path):
    block = _encoder(variant, synthesizer_options=dict(
                         RANK_OPTIONS, random={"initializer": "he_normal"}),
                     normalize_first=True)
    config = block.get_config()
    assert config["synthesizer"] == variant
    assert config["max_length"] == MAX_LEN
    clone = SynthesizerEncoder.from_config(config)
    assert clone.get_config() == config

    inputs = keras.Input((T, D))
    model = keras.Model(inputs, block(inputs))
    x, padding = _inputs()
    expected = _np(model(x))
    path = os.path.join(tmp_path, "encoder.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(_np(restored(x)), expected, **TOL)
    layer = restored.layers[-1]
    assert isinstance(layer, SynthesizerEncoder)
    assert layer.self_attention.synthesizer == variant


def test_saved_model_export(tmp_path):
    harness.skip_unless_saved_model_export()
    import tensorflow as tf

    block = _encoder("random+vanilla")
    inputs = keras.Input((T, D))
    model = keras.Model(inputs, block(inputs))
    x, _ = _inputs()
    path = os.path.join(tmp_path, "saved")
    model.export(path)
    reloaded = tf.saved_model.load(path)
    np.testing.assert_allclose(
        reloaded.serve(tf.constant(x)).numpy(), _np(model(x)), **TOL
    )


@pytest.mark.parametrize("variant", harness.MIXTURES[:2])
def test_layer_harness(variant, tmp_path):
    """Build, call, config and .keras round trips, fit, mixed precision and
    a compiled call (tests/layers/layer_harness.py)."""
    x, padding = _inputs()
    harness.run_layer_test(
        SynthesizerEncoder,
        dict(intermediate_dim=FFN, num_heads=HEADS, synthesizer=variant,
             max_length=MAX_LEN, synthesizer_options=RANK_OPTIONS),
        (x,),
        call_kwargs={"padding_mask": padding},
        expected_output_shape=(B, T, D),
        tmp_path=tmp_path,
    )
