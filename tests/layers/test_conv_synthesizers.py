"""The convolution synthesizers `light_conv` and `dynamic_conv` (Wu et al.,
2019): against the float64 NumPy reference and against a direct convolution
written here, with masks, in mixtures, in cached decoding, through `.keras`
files, in the blocks and a backbone, and their option errors.

The direct convolution is LightConv's / DynamicConv's own formula,

    out_h[t] = sum_j softmax_j(w_h) v_h[t + j - before],   j = 0 ... K - 1,

with `before = (K - 1) // 2` (centered) or `K - 1` (causal) and `w_h` a
learned kernel (light) or `W_h x_t + b_h` (dynamic), one kernel for all the
channels of a head. At the edges of the sequence, and where a mask removes
a key, the softmax is renormalised over the taps whose positions exist and
are allowed (not LightConv's zero padding, where missing taps keep their
share of the weight and contribute zeros): that is what the layer does,
since it masks the keys outside the window before its softmax.
"""

import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from keras_synth.layers import get_synthesizer
from keras_synth.layers import registered_synthesizers
from keras_synth.layers.attention import general as general_attention
from keras_synth.layers.attention import shared as shared_attention
from keras_synth.layers.synthesizers import CONV_VARIANTS
from keras_synth.layers.synthesizers.convolution import (
    ConvolutionSynthesizer,
)
from keras_synth.models import SynthesizerBackbone
from tests.backend_utils import gradients
from tests.layers import layer_harness as harness
from tests.layers import numpy_reference as ref
from tests.layers.decoding_helpers import compiled
from tests.layers.decoding_helpers import decode_step_by_step
from tests.layers.layer_harness import randomize

H, D, KEY_DIM, B, T = 2, 8, 4, 3, 9
TOL = dict(rtol=1e-4, atol=1e-5)
MASKS = ["none", "keys", "causal", "keys+causal"]


def _np(x):
    return ops.convert_to_numpy(x)


def _layer(synthesizer, kernel_size=3, padding="centered", seed=1,
           length=T, **kwargs):
    """A built layer with random weights (`max_length` only where a
    component needs it)."""
    needs = any(get_synthesizer(n).needs_max_length
                for n in synthesizer.split("+"))
    layer = SynthesizerAttention(
        num_heads=H, key_dim=KEY_DIM, synthesizer=synthesizer,
        max_length=length if needs else None,
        synthesizer_options={"kernel_size": kernel_size, "padding": padding},
        **kwargs)
    layer.build((B, length, D), (B, length, D))
    randomize(layer, seed=seed)
    return layer


def _inputs(length=T, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, length, D)).astype("float32")
    keys = np.arange(length)[None] < np.array([[length], [length - 3], [2]])
    return x, keys


def _masks(name, keys):
    return dict(value_mask=keys if "keys" in name else None,
                use_causal_mask="causal" in name)


def _check_against_reference(layer, x, **masks):
    """The general path (with scores) and the path taken without scores
    both equal the NumPy reference."""
    expected, probs = ref.reference_attention(layer, x, x, **masks)
    out, scores = layer(x, x, return_attention_scores=True, **masks)
    np.testing.assert_allclose(_np(out), expected, **TOL)
    np.testing.assert_allclose(_np(scores), probs, **TOL)
    np.testing.assert_allclose(_np(layer(x, x, **masks)), expected, **TOL)
    assert np.isfinite(_np(out)).all()
    return probs


def _direct_convolution(layer, x, kernels, keys=None, causal=False):
    """LightConv/DynamicConv written as a convolution (module docstring):
    `kernels (B, T, H, K)`, one per query position and head."""
    weights = ref.layer_weights(layer)
    options = layer.synthesizer_options[layer.variants[0]]
    size, padding = options["kernel_size"], options["padding"]
    before = size - 1 if padding == "causal" else (size - 1) // 2
    values = np.einsum("bsd,dnh->bsnh", x, weights["value/kernel"]) + (
        weights["value/bias"])
    length = x.shape[1]
    keys = np.ones((x.shape[0], length), bool) if keys is None else keys
    heads = np.zeros(values.shape[:1] + (length,) + values.shape[2:])
    for b in range(x.shape[0]):
        for t in range(length):
            taps = [j for j in range(size)
                    if 0 <= t + j - before < length
                    and keys[b, t + j - before]
                    and not (causal and j > before)]
            if not taps:
                continue  # no key left: a zero output
            for h in range(H):
                w = kernels[b, t, h, taps]
                p = np.exp(w - w.max())
                p = p / p.sum()
                heads[b, t, h] = sum(
                    pj * values[b, t + j - before, h]
                    for pj, j in zip(p, taps))
    return np.einsum("btnh,nhd->btd", heads,
                     weights["attention_output/kernel"]) + (
        weights["attention_output/bias"])


# ------------------------------------------------------------ registration


def test_registered_and_need_no_max_length():
    assert CONV_VARIANTS == ("light_conv", "dynamic_conv")
    for name in CONV_VARIANTS:
        assert name in registered_synthesizers()
        assert not get_synthesizer(name).needs_max_length
    assert not get_synthesizer("light_conv").batch_dependent
    assert get_synthesizer("dynamic_conv").batch_dependent
    layer = SynthesizerAttention(num_heads=H, key_dim=KEY_DIM,
                                 synthesizer="light_conv")
    assert layer.synthesizer_options == {
        "light_conv": {"kernel_size": 3, "padding": "centered"}}


# --------------------------------------------------------------- reference


@pytest.mark.parametrize("variant", CONV_VARIANTS)
@pytest.mark.parametrize("padding", ["centered", "causal"])
@pytest.mark.parametrize("kernel_size", [1, 2, 5, 12])
@pytest.mark.parametrize("masks", MASKS)
def test_matches_numpy_reference(variant, padding, kernel_size, masks):
    layer = _layer(variant, kernel_size, padding)
    x, keys = _inputs()
    probs = _check_against_reference(layer, x, **_masks(masks, keys))
    # At most `kernel_size` keys per row, inside the window.
    assert ((probs > 0).sum(-1) <= kernel_size).all()


def _kernels(layer, x):
    """`(B, T, H, K)`: each query's kernel logits, read from the weights:
    light_conv's one kernel per head, dynamic_conv's projection of x."""
    synthesizer = layer.synthesizers[0]
    if synthesizer.variant == "light_conv":
        kernel = _np(synthesizer.kernel)  # (H, K)
        return np.broadcast_to(kernel, (B, T) + kernel.shape)
    projection = synthesizer.projection
    return np.einsum("btd,dnk->btnk", x, _np(projection.kernel)) + _np(
        projection.bias)


@pytest.mark.parametrize("variant", ["light_conv", "dynamic_conv"])
@pytest.mark.parametrize("padding", ["centered", "causal"])
@pytest.mark.parametrize("kernel_size", [1, 3, 4])
@pytest.mark.parametrize("masks", MASKS)
def test_is_a_direct_convolution(variant, padding, kernel_size, masks):
    layer = _layer(variant, kernel_size, padding)
    x, keys = _inputs()
    args = _masks(masks, keys)
    expected = _direct_convolution(layer, x, _kernels(layer, x),
                                   args["value_mask"], args["use_causal_mask"])
    np.testing.assert_allclose(_np(layer(x, x, **args)), expected, **TOL)
    out, _ = layer(x, x, return_attention_scores=True, **args)
    np.testing.assert_allclose(_np(out), expected, **TOL)


def test_edges_renormalise_over_the_taps_that_exist():
    """Row 0 of a centered window of 3 has taps 1 and 2 only: softmax over
    those two, not LightConv's zero padding (`softmax(w)[1:]`)."""
    layer = _layer("light_conv", 3)
    layer.synthesizers[0].kernel.assign(
        np.array([[1.0, 2.0, 3.0]] * H, "float32"))
    x, _ = _inputs()
    _, scores = layer(x, x, return_attention_scores=True)
    scores = _np(scores)
    first = np.exp([2.0, 3.0]) / np.exp([2.0, 3.0]).sum()
    np.testing.assert_allclose(scores[:, :, 0, :2], np.broadcast_to(
        first, (B, H, 2)), rtol=1e-5)
    middle = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(scores[:, :, 4, 3:6], np.broadcast_to(
        middle, (B, H, 3)), rtol=1e-5)
    assert not scores[:, :, 4, :3].any() and not scores[:, :, 4, 6:].any()


@pytest.mark.parametrize("variant", CONV_VARIANTS)
def test_any_length_without_max_length(variant):
    length = 40
    layer = _layer(variant, 5, "causal", length=length)
    assert layer.max_length is None
    x, keys = _inputs(length)
    _check_against_reference(layer, x, value_mask=keys)


# ----------------------------------------------------------- windowed path


@pytest.fixture
def windowed_only(monkeypatch):
    """Fails any call that builds `T x S` logits, a window or attention
    over them: only the windowed path may run."""
    def fail(*args, **kwargs):
        raise AssertionError("a T x S path ran")

    monkeypatch.setattr(ConvolutionSynthesizer, "window", fail)
    for cls in {get_synthesizer(name) for name in CONV_VARIANTS}:
        monkeypatch.setattr(cls, "logits", fail)
    monkeypatch.setattr(general_attention, "attend", fail)
    monkeypatch.setattr(shared_attention, "shared_attention", fail)
    return monkeypatch


@pytest.mark.parametrize("variant", CONV_VARIANTS)
@pytest.mark.parametrize("padding", ["centered", "causal"])
@pytest.mark.parametrize("masks", MASKS + ["sliding", "attention_keys"])
def test_windowed_path_never_builds_t_by_s(variant, padding, masks,
                                           windowed_only):
    """Alone, with padding, causal, sliding-window or `(B, 1, S)` masks,
    a convolution runs as one (`windowed_only` fails anything else), and
    equals the reference."""
    layer = _layer(variant, 4, padding)
    x, keys = _inputs()
    args, reference_args = _masks(masks, keys), {}
    if masks == "sliding":
        args = dict(use_causal_mask=True)
        layer = SynthesizerAttention.from_config(
            dict(layer.get_config(), sliding_window=2))
        layer(x, x)
        randomize(layer, seed=1)
        offsets = np.arange(T)[None, :] - np.arange(T)[:, None]
        reference_args = dict(attention_mask=np.abs(offsets)[None] < 2)
    elif masks == "attention_keys":
        args = dict(attention_mask=keys[:, None, :])
    out = _np(layer(x, x, **args))
    windowed_only.undo()
    expected, _ = ref.reference_attention(layer, x, x, **args,
                                          **reference_args)
    np.testing.assert_allclose(out, expected, **TOL)


@pytest.mark.parametrize("case", ["scores", "attention_mask", "mixture"])
def test_windowed_path_steps_aside(case, windowed_only):
    """Returned scores, a `(B, T, S)` mask and a mixture take a `T x S`
    path (which `windowed_only` makes fail)."""
    layer = _layer("dynamic_conv+vanilla" if case == "mixture"
                   else "light_conv", 3)
    x, keys = _inputs()
    kwargs = {
        "scores": dict(return_attention_scores=True),
        "attention_mask": dict(attention_mask=np.broadcast_to(
            keys[:, None, :], (B, T, T))),
        "mixture": {},
    }[case]
    with pytest.raises(AssertionError, match="T x S path"):
        layer(x, x, **kwargs)


@pytest.mark.parametrize("variant", CONV_VARIANTS)
def test_windowed_path_at_length_4096(variant, windowed_only):
    """Linear in the length: 4,096 positions, a few rows checked against a
    direct computation over their windows."""
    length = 4096
    layer = _layer(variant, 5, "centered", length=length)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, length, D)).astype("float32")
    out = _np(layer(x, x))
    windowed_only.undo()
    for t in (0, 1, 2048, length - 1):
        lo, hi = max(t - 2, 0), min(t + 3, length)
        piece = x[:, lo:hi]
        expected, _ = ref.reference_attention(
            layer, piece, piece, query_start_index=0)
        np.testing.assert_allclose(out[:, t], expected[:, t - lo], **TOL)


@pytest.mark.parametrize("variant", CONV_VARIANTS)
@pytest.mark.parametrize("padding", ["centered", "causal"])
def test_windowed_path_gradients_equal_the_general_path(variant, padding):
    """The gradients of every weight (and the input) through the windowed
    path equal those through the `T x S` path (taken with scores)."""
    layer = _layer(variant, 3, padding)
    x, keys = _inputs()
    x = ops.convert_to_tensor(x)
    weights = layer.trainable_weights

    def loss(general):
        out = layer(x, x, value_mask=keys, use_causal_mask=True,
                    return_attention_scores=general)
        out = out[0] if general else out
        return ops.sum(ops.square(out))

    fast = gradients(lambda: loss(False), weights)
    general = gradients(lambda: loss(True), weights)
    for weight, a, b in zip(weights, fast, general):
        assert np.any(a != 0), weight.path
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5,
                                   err_msg=weight.path)


@pytest.mark.parametrize("synthesizer", ["light_conv", "dynamic_conv",
                                         "dynamic_conv+vanilla"])
def test_layer_harness(synthesizer, tmp_path):
    """Build, call, config and `.keras` round trips, fit, mixed precision
    and a compiled call (tests/layers/layer_harness.py)."""
    x, keys = _inputs()
    harness.run_layer_test(
        SynthesizerAttention,
        dict(num_heads=H, key_dim=KEY_DIM, synthesizer=synthesizer,
             synthesizer_options={"kernel_size": 3, "padding": "causal"}),
        (x, x),
        call_kwargs={"value_mask": keys, "use_causal_mask": True},
        expected_output_shape=(B, T, D),
        tmp_path=tmp_path,
    )


# ----------------------------------------------------- masks and mixtures


@pytest.mark.parametrize("variant", CONV_VARIANTS)
def test_attention_mask_combines_with_the_window(variant):
    layer = _layer(variant, 3)
    x, keys = _inputs()
    rng = np.random.default_rng(3)
    attention = rng.random((B, T, T)) > 0.4
    attention[0, 4] = False  # a row without any key: zeros, not NaN
    probs = _check_against_reference(layer, x, attention_mask=attention,
                                     value_mask=keys)
    assert not probs[0, :, 4].any()
    # Per head: head h as the reference with that head's mask.
    per_head = rng.random((B, H, T, T)) > 0.3
    _, scores = layer(x, x, attention_mask=per_head,
                      return_attention_scores=True)
    for h in range(H):
        _, probs = ref.reference_attention(layer, x, x,
                                           attention_mask=per_head[:, h])
        np.testing.assert_allclose(_np(scores)[:, h], probs[:, h], **TOL)


@pytest.mark.parametrize("synthesizer", [
    "dynamic_conv+vanilla", "light_conv+random", "light_conv+dynamic_conv",
    "light_conv+factorized_random+vanilla", "dense+dynamic_conv"])
@pytest.mark.parametrize("masks", MASKS)
def test_mixtures_match_numpy_reference(synthesizer, masks):
    layer = _layer(synthesizer, 3, "centered")
    x, keys = _inputs()
    probs = _check_against_reference(layer, x, **_masks(masks, keys))
    # The window restricts the whole mixture.
    assert ((probs > 0).sum(-1) <= 3).all()


def test_mixture_of_two_windows_is_their_intersection():
    layer = SynthesizerAttention(
        num_heads=H, key_dim=KEY_DIM, synthesizer="light_conv+dynamic_conv",
        synthesizer_options={"light_conv": {"kernel_size": 5},
                             "dynamic_conv": {"kernel_size": 3,
                                              "padding": "causal"}})
    x, keys = _inputs()
    _, scores = layer(x, x, return_attention_scores=True)
    offsets = np.arange(T)[None, :] - np.arange(T)[:, None]
    allowed = (offsets >= -2) & (offsets <= 0)  # [-2, 2] and [-2, 0]
    assert not _np(scores)[:, :, ~allowed].any()
    _check_against_reference(layer, x, value_mask=keys)


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize("synthesizer", [
    "light_conv", "dynamic_conv", "dynamic_conv+vanilla",
    "light_conv+random"])
@pytest.mark.parametrize("padding", ["centered", "causal"])
def test_cached_decoding_equals_full_pass(synthesizer, padding):
    layer = _layer(synthesizer, 3, padding)
    x, _ = _inputs()
    # With scores: the general path (the steps may take the windowed one).
    full, _ = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    full = _np(full)
    stepped, _ = compiled(lambda x: decode_step_by_step(layer, x, T))(x)
    np.testing.assert_allclose(_np(stepped), full, **TOL)


@pytest.mark.parametrize("variant", CONV_VARIANTS)
def test_causal_window_decodes_without_a_causal_mask(variant):
    """A causal window needs no causal mask: stepping through the cache
    without one gives the full pass without one."""
    layer = _layer(variant, 4, "causal")
    x, _ = _inputs()
    full = _np(layer(x, x, return_attention_scores=True)[0])
    cache = layer.initial_cache(B, T)
    for t in range(T):
        step = x[:, t:t + 1]
        out, cache = layer(step, step, cache=cache, cache_update_index=t)
        np.testing.assert_allclose(_np(out)[:, 0], full[:, t], **TOL)


# ----------------------------------------------------------- serialization


@pytest.mark.parametrize("synthesizer", ["light_conv", "dynamic_conv+vanilla",
                                         "light_conv+random"])
def test_config_and_keras_round_trip(synthesizer, tmp_path):
    layer = _layer(synthesizer, 5, "causal")
    config = layer.get_config()
    for name in synthesizer.split("+"):
        if name in CONV_VARIANTS:
            assert config["synthesizer_options"][name] == {
                "kernel_size": 5, "padding": "causal"}
    clone = SynthesizerAttention.from_config(config)
    assert clone.get_config() == config

    inputs = keras.Input((T, D))
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    x, _ = _inputs()
    expected = _np(model(x))
    path = os.path.join(tmp_path, "conv.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    (attention,) = [la for la in restored.layers
                    if isinstance(la, SynthesizerAttention)]
    assert attention.get_config() == config
    np.testing.assert_allclose(_np(restored(x)), expected, rtol=1e-6,
                               atol=1e-6)


def test_blocks_and_backbone_accept_them(tmp_path):
    x, keys = _inputs()
    options = {"kernel_size": 3, "padding": "causal"}
    encoder = SynthesizerEncoder(intermediate_dim=16, num_heads=H,
                                 synthesizer="light_conv+vanilla",
                                 synthesizer_options=options)
    assert tuple(encoder(x, padding_mask=keys).shape) == x.shape
    clone = SynthesizerEncoder.from_config(encoder.get_config())
    assert clone.get_config() == encoder.get_config()
    decoder = SynthesizerDecoder(intermediate_dim=16, num_heads=H,
                                 synthesizer="dynamic_conv",
                                 synthesizer_options=options)
    assert tuple(decoder(x, use_causal_mask=True).shape) == x.shape
    assert decoder._self_attention_layer.synthesizer_options == {
        "dynamic_conv": options}

    backbone = SynthesizerBackbone(
        vocabulary_size=20, num_layers=1, num_heads=H, hidden_dim=D,
        intermediate_dim=16, synthesizer="dynamic_conv+light_conv",
        max_sequence_length=T, synthesizer_options=options)
    tokens = {"token_ids": np.ones((B, T), "int32"),
              "segment_ids": np.zeros((B, T), "int32"),
              "padding_mask": keys.astype("int32")}
    expected = _np(backbone(tokens)["sequence_output"])
    preset = os.path.join(tmp_path, "preset")
    backbone.save_to_preset(preset)
    restored = SynthesizerBackbone.from_preset(preset)
    np.testing.assert_allclose(
        _np(restored(tokens)["sequence_output"]), expected, atol=1e-5)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("variant", CONV_VARIANTS)
@pytest.mark.parametrize("options, message", [
    ({"kernel_size": 0}, r"option `kernel_size` of '{v}', expected a "
     r"positive integer. Received: kernel_size=0"),
    ({"kernel_size": 2.5}, r"`kernel_size`.*kernel_size=2.5"),
    ({"kernel_size": True}, r"`kernel_size`.*kernel_size=True"),
    ({"kernel_size": "3"}, r"`kernel_size`.*kernel_size='3'"),
    ({"padding": "same"}, r"option `padding` of '{v}', expected one of "
     r"\('centered', 'causal'\). Received: padding='same'"),
    ({"padding": None}, r"`padding`.*padding=None"),
    ({"kernel": 3}, r"Unknown option 'kernel'.*Did you mean 'kernel_size'"),
])
def test_bad_options_are_clear_errors(variant, options, message):
    with pytest.raises(ValueError, match=message.replace("{v}", variant)):
        SynthesizerAttention(num_heads=H, key_dim=KEY_DIM,
                             synthesizer=variant,
                             synthesizer_options=options)
