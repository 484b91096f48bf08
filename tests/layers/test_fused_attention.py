"""The fused path of variants with a dot-product part against the general
path.

With `flash_attention=True`, or by default on a GPU or TPU, a variant with
a `vanilla` component computes attention with
`keras.ops.dot_product_attention`, the other components' logits as its
bias (`fused_attention`). On this CPU no flash kernel exists, so the tests
take the path the default takes on an accelerator (`on_accelerator`
patched to `True`; the op then runs its non-flash implementation) and
compare it with the layer's general path (`flash_attention=False`): the
same outputs and gradients for every mask shape, mixtures of two and three
components, cached decoding. They also check that the op ran, and the
errors of `flash_attention=True` where no kernel applies.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers.attention import fused as fused_attention
from tests.backend_utils import gradients
from tests.layers.layer_harness import assert_same_outputs_and_gradients
from tests.layers.layer_harness import compiled

BATCH, LENGTH, WIDTH, HEADS, KEY_DIM, MAX_LENGTH = 3, 7, 12, 2, 4, 9
VARIANTS = ["vanilla", "random+vanilla", "vanilla+dense",
            "factorized_random+vanilla", "dense+random+vanilla"]


def _masks():
    rng = np.random.default_rng(5)
    keys = np.ones((BATCH, LENGTH), bool)
    keys[1, 4:] = False
    rows = np.ones((BATCH, LENGTH), bool)
    rows[0, 5:] = False
    empty_row = rng.random((BATCH, LENGTH, LENGTH)) > 0.3
    empty_row[2, 3, :] = False  # a query row with no key
    per_head = rng.random((BATCH, HEADS, LENGTH, LENGTH)) > 0.3
    per_head[:, :, :, 0] = True
    return {
        "none": {},
        "padding": {"value_mask": keys},
        "query+padding": {"query_mask": rows, "value_mask": keys},
        "causal": {"use_causal_mask": True},
        "padding+causal": {"value_mask": keys, "use_causal_mask": True},
        "attention_mask": {"attention_mask": empty_row},
        "per_head": {"attention_mask": per_head},
        "key_padding": {"attention_mask": keys[:, None, :]},
        "sliding_window": {"use_causal_mask": True},
    }


MASKS = _masks()
LAYER_KWARGS = {"sliding_window": {"sliding_window": 3}}


@pytest.fixture
def fused(monkeypatch):
    """Routes the default (`flash_attention=None`) as on an accelerator;
    returns the list of `ops.dot_product_attention` calls made."""
    monkeypatch.setattr(fused_attention, "on_accelerator", lambda: True)
    calls = []
    op = keras.ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return op(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counting)
    return calls


def _inputs():
    return np.random.default_rng(0).standard_normal(
        (BATCH, LENGTH, WIDTH)).astype("float32")


def _layers(variant, **kwargs):
    """The same weights in a layer with the default `flash_attention` and
    one with `flash_attention=False` (the general path)."""
    x = _inputs()
    layers = []
    for flash in (None, False):
        keras.utils.set_random_seed(1)
        layer = SynthesizerAttention(
            num_heads=HEADS, key_dim=KEY_DIM, synthesizer=variant,
            max_length=MAX_LENGTH, flash_attention=flash, **kwargs)
        layer(x, x)
        layers.append(layer)
    for layer in layers:  # mixture weights away from uniform
        if layer.mixture_logits is not None:
            layer.mixture_logits.assign(np.random.default_rng(2).standard_normal(
                layer.mixture_logits.shape).astype("float32"))
    return layers


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_path_matches_general_path(fused, variant, mask):
    layer, general = _layers(variant, **LAYER_KWARGS.get(mask, {}))
    x = _inputs()
    y = ops.convert_to_tensor(np.random.default_rng(3).standard_normal(
        (BATCH, LENGTH, WIDTH)).astype("float32"))
    kwargs = MASKS[mask]

    def run(layer):
        def loss():
            return ops.sum(ops.square(layer(x, x, **kwargs) - y))

        return (ops.convert_to_numpy(layer(x, x, **kwargs)),
                gradients(loss, layer.trainable_variables))

    out, grads = run(layer)
    assert fused, "the fused path did not run"
    assert all(c["bias"] is None for c in fused) == (variant == "vanilla")
    del fused[:]
    reference_out, reference_grads = run(general)
    assert not fused, "flash_attention=False took the fused path"
    assert_same_outputs_and_gradients(
        layer.trainable_variables, out, grads, reference_out, reference_grads)
    if mask == "attention_mask":  # the row without keys: zero attention
        bias = ops.convert_to_numpy(layer.output_dense.bias)
        np.testing.assert_allclose(out[2, 3], bias, atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="PyTorch runs the layer eagerly; no compiler")
@pytest.mark.parametrize("variant", ["random+vanilla", "dense+vanilla"])
def test_compiled_fused_path_matches_general_path(fused, variant):
    layer, general = _layers(variant)
    x = _inputs()
    mask = MASKS["padding+causal"]["value_mask"]

    def call(layer):
        return compiled(lambda x, m: layer(x, x, value_mask=m,
                                           use_causal_mask=True))(x, mask)

    out = ops.convert_to_numpy(call(layer))
    assert fused
    np.testing.assert_allclose(out, ops.convert_to_numpy(call(general)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["vanilla", "random+vanilla"])
def test_fused_cached_decoding_matches_general_path(fused, variant):
    """Step by step through a cache, as generation runs."""
    layer, general = _layers(variant)
    x = _inputs()
    outputs = []
    for current in (layer, general):
        cache = current.initial_cache(BATCH, MAX_LENGTH)
        steps = []
        for i in range(LENGTH):
            out, cache = current(x[:, i:i + 1], x[:, i:i + 1], cache=cache,
                                 cache_update_index=i, use_causal_mask=True)
            steps.append(ops.convert_to_numpy(out))
        outputs.append(np.concatenate(steps, axis=1))
    assert fused
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-5)
    full = ops.convert_to_numpy(general(x, x, use_causal_mask=True))
    np.testing.assert_allclose(outputs[0], full, rtol=1e-5, atol=1e-5)


def test_fused_path_not_taken_on_the_cpu_by_default(monkeypatch):
    calls = []
    op = keras.ops.dot_product_attention
    monkeypatch.setattr(keras.ops, "dot_product_attention",
                        lambda *a, **k: calls.append(k) or op(*a, **k))
    monkeypatch.setattr(fused_attention, "on_accelerator", lambda: False)
    layer, _ = _layers("random+vanilla")
    layer(_inputs(), _inputs())
    assert not calls


@pytest.mark.parametrize("kwargs", [
    {"dropout": 0.1}, {"return_attention_scores": True}])
def test_fused_path_not_taken_with_dropout_or_scores(fused, kwargs):
    layer, _ = _layers("random+vanilla", dropout=kwargs.get("dropout", 0.0))
    del fused[:]  # the builds' calls (no dropout without `training`)
    x = _inputs()
    if "dropout" in kwargs:
        out = layer(x, x, training=True)
    else:
        out, scores = layer(x, x, return_attention_scores=True)
        assert tuple(scores.shape) == (BATCH, HEADS, LENGTH, LENGTH)
    assert not fused
    assert tuple(out.shape) == (BATCH, LENGTH, WIDTH)


def test_flash_attention_true_passes_the_flag(monkeypatch):
    """`True` reaches the op (which on this CPU may raise: no kernel)."""
    calls = []

    def record(*args, **kwargs):
        calls.append(kwargs)
        return ops.zeros(ops.shape(args[2]), args[2].dtype)

    monkeypatch.setattr(keras.ops, "dot_product_attention", record)
    keras.utils.set_random_seed(1)
    layer = SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                                 synthesizer="random+vanilla",
                                 max_length=MAX_LENGTH, flash_attention=True)
    layer(_inputs(), _inputs())
    assert calls and all(c["flash_attention"] is True for c in calls)
    assert layer.get_config()["flash_attention"] is True
    restored = SynthesizerAttention.from_config(layer.get_config())
    assert restored.get_config()["flash_attention"] is True


def test_flash_attention_errors():
    with pytest.raises(ValueError, match=r"argument `flash_attention`.*no "
                       r"dot-product part.*flash_attention=True"):
        SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                             synthesizer="random", max_length=MAX_LENGTH,
                             flash_attention=True)
    with pytest.raises(ValueError, match=r"Dropout.*dropout=0.2"):
        SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                             synthesizer="vanilla", dropout=0.2,
                             flash_attention=True)
    with pytest.raises(ValueError, match=r"`flash_attention`.*Expected None, "
                       r"True or False.*flash_attention='yes'"):
        SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                             synthesizer="vanilla", flash_attention="yes")
    layer = SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                                 synthesizer="vanilla", flash_attention=True)
    with pytest.raises(ValueError, match=r"attention scores.*flash"):
        layer(_inputs(), _inputs(), return_attention_scores=True)
    # Pure synthesizers keep accepting None and False.
    for flash in (None, False):
        SynthesizerAttention(num_heads=HEADS, key_dim=KEY_DIM,
                             synthesizer="random", max_length=MAX_LENGTH,
                             flash_attention=flash)
