"""`SynthesizerDecoder`: a keras-nlp `TransformerDecoder` with synthesized attention."""

import functools
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import SynthesizerDecoder
import keras_hub
from tests.backend_utils import gradients
from tests.layers import layer_harness as harness

VARIANTS = list(harness.ALL_VARIANTS)
B, T, S, D, HEADS, FFN, MAX_LEN, RANK = 2, 6, 5, 16, 2, 24, 8, 3
RANK_OPTIONS = {"factorized_random": {"rank": RANK}}
K = D // HEADS
TOL = dict(atol=1e-5, rtol=1e-5)
GRADIENT_CASES = {("random+dense", None), ("dense+vanilla", None),
                  ("factorized_dense", None),
                  ("random", "vanilla"), ("dense", "random"),
                  ("factorized_random", "dense+vanilla")}
SUBLAYERS = (
    "_self_attention_layer_norm",
    "_cross_attention_layer_norm",
    "_feedforward_layer_norm",
    "_feedforward_intermediate_dense",
    "_feedforward_output_dense",
)


def _np(x):
    return ops.convert_to_numpy(x)


def _decoder(variant, cross=None, normalize_first=False, **kwargs):
    layer = SynthesizerDecoder(
        intermediate_dim=FFN, num_heads=HEADS, synthesizer=variant,
        cross_attention_synthesizer=cross or "vanilla", max_length=MAX_LEN,
        normalize_first=normalize_first,
        synthesizer_options=kwargs.pop("synthesizer_options", RANK_OPTIONS),
        **kwargs,
    )
    layer.build((B, T, D), (B, S, D) if cross else None)
    harness.randomize(layer, seed=2)
    return layer


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, D)).astype("float32")
    enc = rng.standard_normal((B, S, D)).astype("float32")
    dec_padding = np.arange(T)[None, :] < np.array([[T], [4]])
    enc_padding = np.arange(S)[None, :] < np.array([[S], [3]])
    return x, enc, dec_padding, enc_padding


_logit_path_params = functools.partial(
    harness.logit_path_params, d=D, heads=HEADS, k=K, length=MAX_LEN, rank=RANK
)


def _keras_nlp_decoder(cross, normalize_first=False, **kwargs):
    layer = keras_hub.layers.TransformerDecoder(
        intermediate_dim=FFN, num_heads=HEADS,
        normalize_first=normalize_first, **kwargs,
    )
    layer.build((B, T, D), (B, S, D) if cross else None)
    harness.randomize(layer, seed=7)
    return layer


# ----------------------------------------------------------------- identity


def test_is_a_keras_nlp_transformer_decoder():
    layer = SynthesizerDecoder(intermediate_dim=8, num_heads=2,
                               synthesizer="random", max_length=8)
    assert isinstance(layer, keras_hub.layers.TransformerDecoder)
    assert layer.cross_attention_synthesizer == "vanilla"


@pytest.mark.parametrize(
    "variant, cross",
    [(v, None) for v in VARIANTS]
    + [("random", "vanilla"), ("dense", "random"),
       ("factorized_random", "dense+vanilla")],
)
def test_parameter_count_and_no_dead_weights(variant, cross):
    layer = _decoder(variant, cross=cross)
    reference = _keras_nlp_decoder(cross is not None)
    dot_product = 2 * (D * HEADS * K + HEADS * K)
    expected = reference.count_params() - dot_product + _logit_path_params(
        variant)
    if cross:
        expected += _logit_path_params(cross) - dot_product
    assert layer.count_params() == expected
    assert isinstance(layer.self_attention, SynthesizerAttention)
    assert layer.self_attention.synthesizer == variant
    if cross:
        assert layer.cross_attention.synthesizer == cross
    else:
        assert layer.cross_attention is None
    assert not any(
        isinstance(sub, keras.layers.MultiHeadAttention)
        for sub in layer._flatten_layers()
    )
    if (variant, cross) not in GRADIENT_CASES:
        return
    # Every trainable weight is used: it gets a non-zero gradient.
    x, enc, dec_padding, enc_padding = _inputs()
    args = (x, enc) if cross else (x,)
    grads = gradients(
        lambda: ops.sum(ops.square(layer(*args))), layer.trainable_weights
    )
    for weight, grad in zip(layer.trainable_weights, grads):
        assert np.any(grad != 0), weight.path


# ----------------------------------------------------------------- outputs


def _copy_keras_nlp_weights(ours, theirs):
    pairs = []
    for name in ("_self_attention_layer", "_cross_attention_layer"):
        mha = getattr(theirs, name)
        if mha is None:
            continue
        mine = getattr(ours, name)
        vanilla = mine.synthesizers[0]
        pairs += [
            (vanilla.query_dense, mha._query_dense),
            (vanilla.key_dense, mha._key_dense),
            (mine.value_dense, mha._value_dense),
            (mine.output_dense, mha._output_dense),
        ]
    for name in SUBLAYERS:
        if hasattr(theirs, name):
            pairs.append((getattr(ours, name), getattr(theirs, name)))
    for mine, other in pairs:
        mine.set_weights(other.get_weights())


def _cached_step(layer, x_t, t, enc, self_cache, cross_cache):
    """Decoding step `t` of a decoder block (ours or keras-hub's) with
    caches, filling the cross-attention cache (with `enc`) at `t = 0`.
    Returns `(y, self_cache, cross_cache)`."""
    kwargs = dict(self_attention_cache=self_cache,
                  self_attention_cache_update_index=t)
    if enc is None:
        y, self_cache = layer(x_t, **kwargs)
        return y, self_cache, cross_cache
    return layer(
        x_t, enc, cross_attention_cache=cross_cache,
        cross_attention_cache_update_index=0 if t == 0 else None, **kwargs,
    )


@pytest.mark.parametrize("cross", [False, True], ids=["lm", "seq2seq"])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_vanilla_equals_keras_nlp_decoder(cross, normalize_first):
    theirs = _keras_nlp_decoder(cross, normalize_first)
    ours = _decoder("vanilla", cross="vanilla" if cross else None,
                    normalize_first=normalize_first)
    _copy_keras_nlp_weights(ours, theirs)
    x, enc, dec_padding, enc_padding = _inputs()
    args = (x, enc) if cross else (x,)
    masks = {"decoder_padding_mask": dec_padding}
    if cross:
        masks["encoder_padding_mask"] = enc_padding
    for kwargs in ({}, masks, {"use_causal_mask": False}):
        np.testing.assert_allclose(
            _np(ours(*args, **kwargs)), _np(theirs(*args, **kwargs)), **TOL
        )
    # keras-nlp's own key/value caches work unchanged with `vanilla`.
    self_cache = ops.zeros((B, 2, MAX_LEN, HEADS, K))
    cross_cache = ops.zeros((B, 2, S, HEADS, K)) if cross else None
    mine = (ours.initial_cache(B, MAX_LEN),
            ours.initial_cross_attention_cache(B, S) if cross else None)
    assert tuple(mine[0].shape) == tuple(self_cache.shape)
    caches = {"ours": mine, "theirs": (self_cache, cross_cache)}
    for t in range(T):
        step = {}
        for who, layer in (("ours", ours), ("theirs", theirs)):
            y, c_self, c_cross = _cached_step(
                layer, x[:, t:t + 1], t, enc if cross else None, *caches[who]
            )
            caches[who] = (c_self, c_cross)
            step[who] = _np(y)
        np.testing.assert_allclose(step["ours"], step["theirs"], **TOL)
    np.testing.assert_allclose(_np(caches["ours"][0]),
                               _np(caches["theirs"][0]), **TOL)


def test_exact_gelu_equals_keras_nlp_decoder_gelu():
    """`activation="gelu"` (Keras's exact GELU) runs as `exact_gelu`, which
    is Keras's gelu, and through erf (not the backends' erfc) when traced
    for ONNX; the block equals keras-nlp's with the same weights both
    ways, and its config still says "gelu"."""
    from keras_synth.layers.blocks.base import exact_gelu
    from keras_synth.layers.keras_utils import tracing_for_export

    theirs = _keras_nlp_decoder(False, activation="gelu")
    ours = _decoder("vanilla", activation="gelu")
    _copy_keras_nlp_weights(ours, theirs)
    assert ours._feedforward_intermediate_dense.activation is exact_gelu
    assert ours.get_config()["activation"] == "gelu"
    x, _, dec_padding, _ = _inputs()
    # Larger inputs reach GELU's tails, where erf and erfc differ most.
    x = 4.0 * x
    expected = _np(theirs(x, decoder_padding_mask=dec_padding))
    np.testing.assert_allclose(
        _np(ours(x, decoder_padding_mask=dec_padding)), expected, **TOL)
    with tracing_for_export("onnx"):
        np.testing.assert_allclose(
            _np(ours(x, decoder_padding_mask=dec_padding)), expected, **TOL)
    grid = np.linspace(-12, 12, 4001).astype("float32")
    np.testing.assert_array_equal(_np(exact_gelu(grid)),
                                  _np(keras.activations.gelu(grid)))
    with tracing_for_export("onnx"):
        onnx_form = _np(exact_gelu(grid))
    np.testing.assert_allclose(onnx_form, _np(keras.activations.gelu(grid)),
                               rtol=0, atol=2e-6)
    assert not np.array_equal(onnx_form, _np(keras.activations.gelu(grid)))


def _hand_assembled(block, x, enc=None, dec_padding=None, enc_padding=None):
    """The block from standalone SynthesizerAttention and Keras layers."""
    x = ops.convert_to_tensor(x)
    enc = None if enc is None else ops.convert_to_tensor(enc)

    def clone(original, *shapes):
        layer = original.__class__.from_config(original.get_config())
        layer.build(*shapes)
        layer.set_weights(original.get_weights())
        return layer

    width = x.shape[-1]
    self_attention = clone(block.self_attention, x.shape, x.shape)
    ln_self = clone(block._self_attention_layer_norm, x.shape)
    ffn1 = clone(block._feedforward_intermediate_dense, x.shape)
    ffn2 = clone(block._feedforward_output_dense,
                 (None, None, block.intermediate_dim))
    ln_ffn = clone(block._feedforward_layer_norm, x.shape)
    pre = block.normalize_first

    h = ln_self(x) if pre else x
    h = self_attention(h, h, value_mask=dec_padding, use_causal_mask=True)
    h = h + x
    h = h if pre else ln_self(h)
    if enc is not None:
        cross_attention = clone(block.cross_attention, x.shape, enc.shape)
        ln_cross = clone(block._cross_attention_layer_norm, x.shape)
        residual = h
        q = ln_cross(h) if pre else h
        h = cross_attention(q, enc, value_mask=enc_padding) + residual
        h = h if pre else ln_cross(h)
    residual = h
    q = ln_ffn(h) if pre else h
    h = ffn2(ffn1(q)) + residual
    h = h if pre else ln_ffn(h)
    assert h.shape[-1] == width
    return _np(h)


@pytest.mark.parametrize(
    "variant, cross",
    [(v, None) for v in VARIANTS]
    + [(v, "vanilla") for v in ("dense", "random+vanilla")]
    + [("random", c) for c in ("random", "dense", "factorized_random")],
)
def test_block_equals_hand_assembled_block(variant, cross):
    block = _decoder(variant, cross=cross,
                     normalize_first=variant == "random+dense")
    x, enc, dec_padding, enc_padding = _inputs()
    args = (x, enc) if cross else (x,)
    ref_enc = enc if cross else None
    np.testing.assert_allclose(_np(block(*args)),
                               _hand_assembled(block, x, ref_enc), **TOL)
    kwargs = {"decoder_padding_mask": dec_padding}
    if cross:
        kwargs["encoder_padding_mask"] = enc_padding
    np.testing.assert_allclose(
        _np(block(*args, **kwargs)),
        _hand_assembled(block, x, ref_enc, dec_padding,
                        enc_padding if cross else None),
        **TOL,
    )


@pytest.mark.parametrize("variant", ["random", "dense+vanilla"])
def test_keras_masks_equal_explicit_masks_through_a_stack(variant):
    """Keras masks of both sequences act as padding masks, in every block
    of a stack (the encoder output keeps its mask between blocks)."""
    blocks = [_decoder(variant, cross="random") for _ in range(2)]
    harness.randomize(blocks[1], seed=9)
    dec_tokens = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 0, 0]])
    enc_tokens = np.array([[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]])
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    x, enc = embedding(dec_tokens), embedding(enc_tokens)
    x_plain = ops.convert_to_tensor(_np(x))
    enc_plain = ops.convert_to_tensor(_np(enc))
    y, y_explicit = x, x_plain
    for block in blocks:
        y = block(y, enc)
        y_explicit = block(y_explicit, enc_plain,
                           decoder_padding_mask=dec_tokens != 0,
                           encoder_padding_mask=enc_tokens != 0)
    np.testing.assert_allclose(_np(y), _np(y_explicit), **TOL)
    np.testing.assert_array_equal(_np(y._keras_mask), dec_tokens != 0)
    np.testing.assert_array_equal(_np(enc._keras_mask), enc_tokens != 0)
    # Padded encoder positions do not change the outputs.
    enc_changed = _np(enc).copy()
    enc_changed[1, 2:] = 5.0
    y_changed = x_plain
    for block in blocks:
        y_changed = block(y_changed, enc_changed,
                          decoder_padding_mask=dec_tokens != 0,
                          encoder_padding_mask=enc_tokens != 0)
    np.testing.assert_allclose(_np(y_changed), _np(y_explicit), **TOL)


def test_call_errors():
    decoder_only = _decoder("random")
    x, enc, _, _ = _inputs()
    with pytest.raises(ValueError, match="without cross attention"):
        decoder_only(x, enc)
    with_cross = _decoder("random", cross="vanilla")
    with pytest.raises(ValueError, match="with cross attention"):
        with_cross(x)
    with pytest.raises(ValueError, match="both be set"):
        with_cross(x[:, :1], enc,
                   self_attention_cache=with_cross.initial_cache(B, MAX_LEN),
                   self_attention_cache_update_index=0)
    with pytest.raises(ValueError, match="cross_attention_synthesizer"):
        SynthesizerDecoder(intermediate_dim=8, num_heads=2,
                           synthesizer="vanilla",
                           cross_attention_synthesizer="random")
    with pytest.raises(ValueError, match="synthesizer"):
        SynthesizerDecoder(intermediate_dim=8, num_heads=2,
                           synthesizer="dense+dense", max_length=8)


# ----------------------------------------------------------- serialization


@pytest.mark.parametrize("variant, cross", [("random", None),
                                            ("dense+vanilla", "random")])
def test_config_and_keras_round_trip(variant, cross, tmp_path):
    block = _decoder(variant, cross=cross, synthesizer_options=dict(
        RANK_OPTIONS, random={"initializer": "he_normal"}))
    config = block.get_config()
    assert config["synthesizer"] == variant
    assert config["cross_attention_synthesizer"] == (cross or "vanilla")
    clone = SynthesizerDecoder.from_config(config)
    assert clone.built  # keras-nlp builds a restored decoder right away
    assert clone.get_config() == config

    x, enc, dec_padding, enc_padding = _inputs()
    dec_in = keras.Input((T, D))
    inputs = [dec_in]
    if cross:
        enc_in = keras.Input((S, D))
        inputs.append(enc_in)
        outputs = block(dec_in, enc_in)
    else:
        outputs = block(dec_in)
    model = keras.Model(inputs, outputs)
    data = [x, enc] if cross else [x]
    expected = _np(model(data))
    path = os.path.join(tmp_path, "decoder.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(_np(restored(data)), expected, **TOL)
    layer = [la for la in restored.layers
             if isinstance(la, SynthesizerDecoder)][0]
    assert layer.self_attention.synthesizer == variant


def test_saved_model_export(tmp_path):
    harness.skip_unless_saved_model_export()
    import tensorflow as tf

    block = _decoder("random+vanilla", cross="dense")
    dec_in, enc_in = keras.Input((T, D)), keras.Input((S, D))
    model = keras.Model([dec_in, enc_in], block(dec_in, enc_in))
    x, enc, _, _ = _inputs()
    path = os.path.join(tmp_path, "saved")
    model.export(path)
    reloaded = tf.saved_model.load(path)
    np.testing.assert_allclose(
        reloaded.serve([tf.constant(x), tf.constant(enc)]).numpy(),
        _np(model([x, enc])), **TOL,
    )


@pytest.mark.parametrize("variant", harness.MIXTURES[:2])
def test_layer_harness(variant, tmp_path):
    """Build, call, config and .keras round trips, fit, mixed precision and
    a compiled call (tests/layers/layer_harness.py)."""
    x = np.random.default_rng(1).standard_normal((B, T, D)).astype("float32")
    padding = np.arange(T)[None, :] < np.array([[T], [4]])
    harness.run_layer_test(
        SynthesizerDecoder,
        dict(intermediate_dim=FFN, num_heads=HEADS, synthesizer=variant,
             max_length=MAX_LEN, synthesizer_options=RANK_OPTIONS),
        (x,),
        call_kwargs={"decoder_padding_mask": padding},
        expected_output_shape=(B, T, D),
        tmp_path=tmp_path,
    )


# ------------------------------------------ keras-hub's cache layout


@pytest.mark.parametrize("variant", ["random", "dense", "factorized_random"])
@pytest.mark.parametrize("cross", [None, "random"], ids=["lm", "seq2seq"])
def test_pure_synthesizer_accepts_keras_hub_cache_layout(variant, cross):
    layer = _decoder(variant, cross=cross)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((B, T, D)).astype("float32")
    enc = rng.standard_normal((B, S, D)).astype("float32") if cross else None
    compact = layer.initial_cache(B, T)
    assert tuple(compact.shape) == (B, 1, T, HEADS, K)  # still the default
    # keras-hub's layout, with a key slot holding garbage it must not touch.
    keys = rng.standard_normal((B, 1, T, HEADS, K)).astype("float32")
    hub = ops.concatenate([ops.convert_to_tensor(keys), compact], axis=1)
    if cross:
        cross_compact = layer.initial_cross_attention_cache(B, S)
        cross_keys = rng.standard_normal((B, 1, S, HEADS, K)).astype("float32")
        cross_hub = ops.concatenate(
            [ops.convert_to_tensor(cross_keys), cross_compact], axis=1)
    full = _np(layer(x, enc) if cross else layer(x))
    caches = {"compact": (compact, cross_compact if cross else None),
              "hub": (hub, cross_hub if cross else None)}
    steps = {}
    for name, (self_cache, cross_cache) in caches.items():
        outputs = []
        for t in range(T):
            y, self_cache, cross_cache = _cached_step(
                layer, x[:, t:t + 1], t, enc, self_cache, cross_cache
            )
            outputs.append(_np(y))
        steps[name] = (np.concatenate(outputs, axis=1), self_cache,
                       cross_cache)
    np.testing.assert_allclose(steps["hub"][0], full, **TOL)
    np.testing.assert_allclose(steps["hub"][0], steps["compact"][0], **TOL)
    hub_cache, compact_cache = steps["hub"][1], steps["compact"][1]
    assert tuple(hub_cache.shape) == (B, 2, T, HEADS, K)  # layout kept
    np.testing.assert_array_equal(_np(hub_cache)[:, :1], keys)  # untouched
    np.testing.assert_allclose(_np(hub_cache)[:, 1:], _np(compact_cache),
                               **TOL)
    if cross:
        np.testing.assert_array_equal(_np(steps["hub"][2])[:, :1],
                                      cross_keys)


def test_dot_product_variant_keeps_its_key_value_cache():
    layer = _decoder("random+vanilla")
    cache = layer.initial_cache(B, T)
    assert tuple(cache.shape) == (B, 2, T, HEADS, K)
    with pytest.raises(ValueError, match="cache"):
        layer(np.zeros((B, 1, D), "float32"),
              self_attention_cache=cache[:, 1:],
              self_attention_cache_update_index=0)


# ------------------------------------------ keras-hub's config contract


@pytest.mark.parametrize("cross", [None, "random"], ids=["lm", "seq2seq"])
def test_config_carries_build_shapes_without_keras_hub_privates(cross):
    # The block writes the build shapes into its config itself (keras-hub's
    # `TransformerDecoder` keeps them in private attributes a release may
    # rename); a block restored from its config is built and loads weights.
    layer = _decoder("random", cross=cross)
    config = layer.get_config()
    assert tuple(config["decoder_sequence_shape"]) == (B, T, D)
    assert (config["encoder_sequence_shape"] is None) == (cross is None)
    restored = SynthesizerDecoder.from_config(config)
    assert restored.built
    restored.set_weights(layer.get_weights())
    rng = np.random.default_rng(6)
    x = rng.standard_normal((B, T, D)).astype("float32")
    args = (x, rng.standard_normal((B, S, D)).astype("float32")) if cross \
        else (x,)
    np.testing.assert_allclose(_np(restored(*args)), _np(layer(*args)), **TOL)


def test_keras_hub_decoder_config_has_the_keys_we_write():
    # Our configs stay in keras-hub's format: its decoder writes and reads
    # the same two keys (a release that renames them fails here).
    theirs = keras_hub.layers.TransformerDecoder(intermediate_dim=FFN,
                                                 num_heads=HEADS)
    theirs.build((B, T, D), (B, S, D))
    config = theirs.get_config()
    assert tuple(config["decoder_sequence_shape"]) == (B, T, D)
    assert tuple(config["encoder_sequence_shape"]) == (B, S, D)
    assert keras_hub.layers.TransformerDecoder.from_config(config).built
