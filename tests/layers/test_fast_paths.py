"""The fast paths of `SynthesizerAttention` against its general path.

Batch-independent variants (random, fixed random, factorized random) attend
with `H x T x S` probabilities; with a key padding mask they normalise after
the product with the values (`_compute_shared_attention`). The private switch
`layer._fast_paths = False` forces the general path, which builds the
`B x H x T x S` probabilities. Both must give the same outputs and gradients
for the same weights and masks, in eager mode and compiled.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from tests.backend_utils import gradients

SHARED = ("random", "fixed_random", "factorized_random")
BATCH, LENGTH, WIDTH, HEADS, KEY_DIM, MAX_LENGTH = 3, 7, 12, 2, 4, 9


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, LENGTH, WIDTH)).astype("float32")
    keys = np.ones((BATCH, LENGTH), bool)
    keys[1, 4:] = False  # a padded example
    keys[2, :] = False
    keys[2, 2] = True  # one key left
    rows = np.ones((BATCH, LENGTH), bool)
    rows[0, 5:] = False
    other = np.ones((BATCH, LENGTH), bool)
    other[0, 1] = False
    return x, keys, rows, other


def _masks():
    _, keys, rows, other = _inputs()
    return {
        "none": {},
        "padding": {"value_mask": keys},
        "causal": {"use_causal_mask": True},
        "padding+causal": {"value_mask": keys, "use_causal_mask": True},
        "query": {"query_mask": rows},
        "query+padding": {"query_mask": rows, "value_mask": keys},
        "key+value": {"key_mask": other, "value_mask": keys},
        "all_masked_example": {
            "value_mask": np.concatenate(
                [keys[:2], np.zeros((1, LENGTH), bool)]
            ),
            "use_causal_mask": True,
        },
    }


MASKS = _masks()


def _layer(variant, seed=1, **kwargs):
    keras.utils.set_random_seed(seed)
    layer = SynthesizerAttention(
        num_heads=HEADS, key_dim=KEY_DIM, synthesizer=variant,
        max_length=MAX_LENGTH, **kwargs,
    )
    x = _inputs()[0]
    layer(x, x)
    return layer


def _both(layer, fn):
    """Runs `fn()` with the fast paths on, then forced off."""
    layer._fast_paths = True
    fast = fn()
    layer._fast_paths = False
    try:
        general = fn()
    finally:
        layer._fast_paths = True
    return fast, general


def _spread_logits(layer):
    """Makes the random logits span > 80 in a row, so that the key-padded
    shared path must fall back to one example at a time."""
    kernel = layer.synthesizers[0].kernel
    value = ops.convert_to_numpy(kernel.value).copy()
    value[:, :, 4:] += 200.0  # keys 4.. dominate; example 1 masks them
    kernel.assign(value)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("variant", SHARED)
def test_fast_path_matches_general_path(variant, mask):
    layer = _layer(variant)
    x = _inputs()[0]
    kwargs = MASKS[mask]
    fast, general = _both(
        layer, lambda: ops.convert_to_numpy(layer(x, x, **kwargs))
    )
    assert np.isfinite(fast).all()
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-5)
    if "value_mask" in kwargs and not kwargs["value_mask"][2].any():
        # Keys all masked for example 2: zeros, as on the general path.
        np.testing.assert_array_equal(
            fast[2], ops.convert_to_numpy(layer.output_dense.bias)[None]
            * np.ones_like(fast[2])
        )


@pytest.mark.parametrize("mask", ["padding", "padding+causal", "causal",
                                  "query+padding"])
@pytest.mark.parametrize("variant", ["random", "factorized_random"])
@pytest.mark.parametrize("spread", [False, True], ids=["normal", "spread"])
def test_fast_path_gradients_match_general_path(variant, mask, spread):
    if spread and variant != "random":
        pytest.skip("the spread case sets random logits directly")
    layer = _layer(variant)
    if spread:
        _spread_logits(layer)
    _assert_same_outputs_and_gradients(layer, MASKS[mask])


def _assert_same_outputs_and_gradients(layer, kwargs):
    """Fast and general path: same outputs and gradients of a loss."""
    x = _inputs()[0]
    y = ops.convert_to_tensor(
        np.random.default_rng(3).standard_normal(x.shape).astype("float32")
    )
    variables = layer.trainable_variables

    def loss():
        return ops.sum(ops.square(layer(x, x, **kwargs) - y))

    (fast_out, fast_grads), (out, grads) = _both(
        layer,
        lambda: (ops.convert_to_numpy(layer(x, x, **kwargs)),
                 gradients(loss, variables)),
    )
    assert np.isfinite(fast_out).all()
    np.testing.assert_allclose(fast_out, out, rtol=1e-5, atol=1e-5)
    for variable, fast_grad, grad in zip(variables, fast_grads, grads):
        assert np.isfinite(fast_grad).all(), variable.path
        scale = max(1.0, float(np.abs(grad).max()))
        np.testing.assert_allclose(
            fast_grad / scale, grad / scale, atol=2e-5, err_msg=variable.path
        )


def test_spread_logits_fall_back_exactly():
    """Logits spanning more than float32's exp range in one row: an example
    that masks the dominant keys still gets its own softmax (no zeros)."""
    layer = _layer("random")
    _spread_logits(layer)
    x, keys, _, _ = _inputs()
    fast, general = _both(
        layer,
        lambda: ops.convert_to_numpy(layer(x, x, value_mask=keys)),
    )
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-5)
    bias = ops.convert_to_numpy(layer.output_dense.bias)
    assert np.abs(fast[1] - bias).max() > 1e-3  # not an all-zero attention


def _compiled(fn):
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    pytest.skip("PyTorch runs the layer eagerly; no compiler is exercised")


@pytest.mark.parametrize("spread", [False, True], ids=["normal", "spread"])
@pytest.mark.parametrize("mask", ["padding", "padding+causal"])
def test_compiled_fast_path_matches_general_path(mask, spread):
    layer = _layer("random")
    if spread:
        _spread_logits(layer)
    x = _inputs()[0]
    kwargs = MASKS[mask]
    keys = kwargs["value_mask"]
    causal = kwargs.get("use_causal_mask", False)

    def run(fast):
        layer._fast_paths = fast
        if keras.backend.backend() == "jax":
            # Stateless under jit: weights as arguments.
            fn = _compiled(
                lambda tv, ntv, x, m: layer.stateless_call(
                    tv, ntv, x, x, value_mask=m, use_causal_mask=causal
                )[0]
            )
            out = fn([v.value for v in layer.trainable_variables],
                     [v.value for v in layer.non_trainable_variables],
                     x, keys)
        else:
            fn = _compiled(
                lambda x, m: layer(x, x, value_mask=m, use_causal_mask=causal)
            )
            out = fn(ops.convert_to_tensor(x), ops.convert_to_tensor(keys))
        layer._fast_paths = True
        return ops.convert_to_numpy(out)

    np.testing.assert_allclose(run(True), run(False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", SHARED)
def test_shared_path_is_taken(variant, monkeypatch):
    """The fast path never reaches the general `_compute_attention`."""
    layer = _layer(variant)
    x, keys, rows, _ = _inputs()

    def forbidden(*args, **kwargs):
        raise AssertionError("general path used")

    monkeypatch.setattr(layer, "_compute_attention", forbidden)
    for kwargs in MASKS.values():
        layer(x, x, **kwargs)
    # Scores, per-example masks and active dropout need the general path.
    with pytest.raises(AssertionError, match="general path"):
        layer(x, x, return_attention_scores=True)
    with pytest.raises(AssertionError, match="general path"):
        layer(x, x, attention_mask=np.ones((BATCH, LENGTH, LENGTH), bool))


@pytest.mark.parametrize(
    "variant", ["dense", "factorized_dense", "vanilla", "random+vanilla"]
)
def test_batch_dependent_variants_keep_the_general_path(variant):
    layer = _layer(variant)
    assert not layer._uses_shared_path(None, False, False)


def test_dropout_keeps_per_example_masks():
    """Active dropout needs per-example probabilities: general path."""
    layer = _layer("random", dropout=0.5)
    assert layer._uses_shared_path(None, False, False)
    assert not layer._uses_shared_path(None, True, False)
    assert not layer._uses_shared_path(None, False, True)


def test_mixed_precision_fast_path_matches_general_path():
    layer = _layer("random", dtype="mixed_bfloat16")
    x, keys, _, _ = _inputs()
    fast, general = _both(
        layer,
        lambda: ops.convert_to_numpy(
            ops.cast(layer(x, x, value_mask=keys, use_causal_mask=True),
                     "float32")
        ),
    )
    np.testing.assert_allclose(fast, general, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("variant", [
    "dense+vanilla", "factorized_random+vanilla", "dense+factorized_random",
    "dense+factorized_random+vanilla", "random+dense+vanilla"])
def test_fused_bilinear_mixture_matches_general_path(variant, use_bias):
    # Two or more bilinear components (vanilla, dense, factorized random)
    # share one contraction of concatenated factors on the fast path.
    layer = _layer(variant, use_bias=use_bias)
    weights = np.random.default_rng(5).standard_normal(
        ops.shape(layer.mixture_weights())).astype("float32")
    layer._mixture_logits.assign(weights)  # unequal per-head weights
    kwargs = MASKS["padding+causal"]
    _assert_same_outputs_and_gradients(layer, kwargs)
    x = _inputs()[0]
    # The fused product is used: one contraction, no per-component logits.
    calls = []
    for synthesizer in layer.synthesizers:
        if synthesizer.bilinear:
            original = synthesizer.logits

            def logits(*args, _original=original, **kw):
                calls.append(1)
                return _original(*args, **kw)

            synthesizer.logits = logits
    layer(x, x, **kwargs)
    assert not calls


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize(
    "variant", ["dense", "vanilla", "factorized_dense", "random+vanilla"])
def test_empty_rows_zeroed_after_values_match_general_path(variant, mask):
    # Batch-dependent logits: the fast path zeroes the outputs of queries
    # with no key left after the product with the values, instead of
    # multiplying the B x H x T x S probabilities by the mask.
    layer = _layer(variant)
    kwargs = MASKS[mask]
    _assert_same_outputs_and_gradients(layer, kwargs)
    x = _inputs()[0]
    fast, general = _both(layer, lambda: ops.convert_to_numpy(
        layer(x, x, return_attention_scores=True, **kwargs)[1]))
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-6)
    if mask == "all_masked_example":
        assert not fast[2].any()  # masked scores are exactly 0
