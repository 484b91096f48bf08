"""The fast paths of `SynthesizerAttention` against its general path.

Batch-independent variants (random, fixed random, factorized random) attend
with `H x T x S` probabilities; with a key padding mask they normalise after
the product with the values (`shared_attention`). The tests call the
attention kernel `attention_paths.attend` directly, with `fast_paths=True`
(what the layer runs) and `fast_paths=False` (the general path, which
builds the `B x H x T x S` probabilities, and no fused mixture). Both must
give the same outputs and gradients for the same weights and masks, in eager
mode and compiled (docs/design.md, "Fast paths"). Under mixed_float16 and
mixed_bfloat16, with logits whose rows span 10-80 (and past 80, the
fallback), the key-padded path equals the float64 NumPy reference to the
compute dtype's tolerance, query blocks included.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers.attention import paths as attention_paths
from keras_synth.layers.attention import general as general_attention
from tests.backend_utils import gradients
from tests.layers.layer_harness import BATCH_INDEPENDENT as SHARED
from tests.layers.layer_harness import assert_same_outputs_and_gradients
from tests.layers.layer_harness import compiled
from tests.layers.numpy_reference import assert_within
from tests.layers.numpy_reference import reference_attention
from tests.layers.numpy_reference import tolerances
from tests.layers.stress_utils import run_layer

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


def attend(layer, x, fast_paths, return_attention_scores=False, **masks):
    """The layer's attention on self-attention input `x` through the kernel
    `attention_paths.attend`, then the output projection."""
    keys = next(
        (s.project_key(x) for s in layer.synthesizers if s.uses_keys), None
    )
    output, scores = attention_paths.attend(
        layer.synthesizers,
        layer.mixture_weights(),
        x,
        keys,
        layer.value_dense(x),
        return_attention_scores=return_attention_scores,
        fast_paths=fast_paths,
        **masks,
    )
    output = layer.output_dense(output)
    return (output, scores) if return_attention_scores else output


def _both(layer, fn):
    """`fn(fast_paths)` with the fast paths on, then off; the layer's own
    call must equal the first."""
    return fn(True), fn(False)


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
        layer, lambda f: ops.convert_to_numpy(attend(layer, x, f, **kwargs))
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(x, x, **kwargs)), fast, rtol=1e-6,
        atol=1e-6,
    )
    assert np.isfinite(fast).all()
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-5)
    if "value_mask" in kwargs and not kwargs["value_mask"][2].any():
        # Keys all masked for example 2: zeros, as on the general path.
        np.testing.assert_array_equal(
            fast[2], ops.convert_to_numpy(layer.output_dense.bias)[None]
            * np.ones_like(fast[2])
        )


# The spread case sets random logits directly: random only.
@pytest.mark.parametrize("mask", ["padding", "padding+causal", "causal",
                                  "query+padding"])
@pytest.mark.parametrize("variant, spread", [
    ("random", False), ("factorized_random", False), ("random", True),
], ids=["random-normal", "factorized_random-normal", "random-spread"])
def test_fast_path_gradients_match_general_path(variant, mask, spread):
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

    def run(fast_paths):
        def loss():
            return ops.sum(ops.square(attend(layer, x, fast_paths, **kwargs) - y))

        return (ops.convert_to_numpy(attend(layer, x, fast_paths, **kwargs)),
                gradients(loss, variables))

    (fast_out, fast_grads), (out, grads) = _both(layer, run)
    assert_same_outputs_and_gradients(variables, fast_out, fast_grads, out,
                                      grads)


def test_spread_logits_fall_back_exactly():
    """Logits spanning more than float32's exp range in one row: an example
    that masks the dominant keys still gets its own softmax (no zeros)."""
    layer = _layer("random")
    _spread_logits(layer)
    x, keys, _, _ = _inputs()
    fast, general = _both(
        layer,
        lambda f: ops.convert_to_numpy(attend(layer, x, f, value_mask=keys)),
    )
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-5)
    bias = ops.convert_to_numpy(layer.output_dense.bias)
    assert np.abs(fast[1] - bias).max() > 1e-3  # not an all-zero attention


@pytest.mark.parametrize("spread", [False, True], ids=["normal", "spread"])
@pytest.mark.parametrize("mask", ["padding", "padding+causal"])
@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="PyTorch runs the layer eagerly; no compiler")
def test_compiled_fast_path_matches_general_path(mask, spread):
    layer = _layer("random")
    if spread:
        _spread_logits(layer)
    x = _inputs()[0]
    kwargs = MASKS[mask]
    keys = kwargs["value_mask"]
    causal = kwargs.get("use_causal_mask", False)

    def run(fast_paths):
        if keras.backend.backend() != "jax":
            fn = compiled(lambda x, m: attend(
                layer, x, fast_paths, value_mask=m, use_causal_mask=causal))
            return ops.convert_to_numpy(
                fn(ops.convert_to_tensor(x), ops.convert_to_tensor(keys)))

        def fn(trainable, non_trainable, x, keys):
            # Stateless under jax.jit: weights as arguments.
            mapping = list(zip(layer.trainable_variables, trainable)) + list(
                zip(layer.non_trainable_variables, non_trainable))
            with keras.StatelessScope(state_mapping=mapping):
                return attend(layer, x, fast_paths, value_mask=keys,
                              use_causal_mask=causal)

        return ops.convert_to_numpy(compiled(fn)(
            [v.value for v in layer.trainable_variables],
            [v.value for v in layer.non_trainable_variables], x, keys,
        ))

    np.testing.assert_allclose(run(True), run(False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", SHARED)
def test_shared_path_is_taken(variant, monkeypatch):
    """The fast path never reaches the general path's kernel."""
    layer = _layer(variant)
    x, keys, rows, _ = _inputs()

    def forbidden(*args, **kwargs):
        raise AssertionError("general path used")

    monkeypatch.setattr(general_attention, "attend", forbidden)
    for kwargs in MASKS.values():
        layer(x, x, **kwargs)
    # A key padding mask (B, 1, S) and a batch-independent (T, S) mask.
    layer(x, x, attention_mask=keys[:, None, :])
    layer(x, x, attention_mask=np.tril(np.ones((LENGTH, LENGTH), bool)))
    # Scores, per-example masks and active dropout need the general path.
    with pytest.raises(AssertionError, match="general path"):
        layer(x, x, return_attention_scores=True)
    with pytest.raises(AssertionError, match="general path"):
        layer(x, x, attention_mask=np.ones((BATCH, LENGTH, LENGTH), bool))


@pytest.mark.parametrize(
    "variant", ["dense", "factorized_dense", "vanilla", "random+vanilla"]
)
def test_batch_dependent_variants_keep_the_general_path(variant, monkeypatch):
    layer = _layer(variant)
    x = _inputs()[0]
    calls = []
    original = general_attention.attend

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(general_attention, "attend", counted)
    layer(x, x)
    assert calls


def test_dropout_keeps_per_example_masks(monkeypatch):
    """Active dropout needs per-example probabilities: general path."""
    layer = _layer("random", dropout=0.5)
    x = _inputs()[0]
    calls = []
    original = general_attention.attend

    def counted(*args, **kwargs):
        calls.append(kwargs.get("training"))
        return original(*args, **kwargs)

    monkeypatch.setattr(general_attention, "attend", counted)
    layer(x, x, training=False)
    assert calls == []
    layer(x, x, training=True)
    assert calls == [True]


def test_mixed_precision_fast_path_matches_general_path():
    layer = _layer("random", dtype="mixed_bfloat16")
    x, keys, _, _ = _inputs()
    fast, general = _both(
        layer,
        lambda f: ops.convert_to_numpy(
            ops.cast(attend(layer, x, f, value_mask=keys,
                            use_causal_mask=True), "float32")
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
    layer.mixture_logits.assign(weights)  # unequal per-head weights
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
    fast, general = _both(layer, lambda f: ops.convert_to_numpy(
        attend(layer, x, f, return_attention_scores=True, **kwargs)[1]))
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-6)
    if mask == "all_masked_example":
        assert not fast[2].any()  # masked scores are exactly 0


# ------------------------------------------- mixed precision, spread logits
#
# The key-padded batch-shared path multiplies the unnormalised weights
# `exp(L - max)` by the values. Cast to float16 (smallest subnormal ~6e-8,
# `exp(-16.6)`), the weights of keys more than ~17 below the batch's row
# maximum vanished, and an example attending only to such keys divided 0 by
# 0: NaN. Spreads of 10-80 (below the fallback's 80) reach that path.

SPREADS = [10.0, 17.0, 25.0, 40.0, 79.0]


def _reference_check(layer, x, **kwargs):
    """The layer's output (through `run_layer`: jitted on JAX) is finite
    and equals the float64 NumPy reference to the compute dtype's
    per-element tolerance."""
    output = run_layer(layer, x, x, **kwargs)
    output = ops.convert_to_numpy(ops.cast(output, "float32")).astype(
        "float64")
    assert np.isfinite(output).all(), "non-finite output"
    expected, _ = reference_attention(layer, x, x, **kwargs)
    output_tol, _, _ = tolerances(layer, x, x, **kwargs)
    assert_within(output, expected, output_tol, "output")
    return output


def test_mixed_float16_key_padding_regression():
    """The reproduction of the issue: random logits 25 on key 0, 0 elsewhere,
    the second example's keys 0-3 hidden: it was NaN under mixed_float16
    on every backend."""
    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = SynthesizerAttention(num_heads=1, key_dim=8,
                                     synthesizer="random", max_length=8,
                                     use_bias=False)
    finally:
        keras.config.set_dtype_policy("float32")
    x = np.random.default_rng(0).standard_normal((2, 8, 8)).astype("float32")
    layer(x, x)
    logits = np.zeros((1, 8, 8), "float32")
    logits[..., 0] = 25.0
    layer.synthesizers[0].kernel.assign(logits)
    value_mask = np.ones((2, 8), bool)
    value_mask[1, :4] = False
    output = ops.convert_to_numpy(
        ops.cast(layer(x, x, value_mask=value_mask), "float32"))
    assert not np.isnan(output).any(), "NaN under mixed_float16"
    _reference_check(layer, x, value_mask=value_mask)


def _spread_layer(variant, policy, spread, seed=1):
    """A batch-independent layer whose logits put keys 0 and 1 `spread`
    above the others in every row (on top of N(0, 1) logits), in the
    mixture's logits too: example 1 of `_inputs` hides keys 4-6, example 2
    all but key 2, so its visible keys sit `spread` below the row maximum
    over the batch."""
    layer = _layer(variant, seed=seed, dtype=policy)
    rng = np.random.default_rng(seed)
    weights = layer.mixture_weights()
    alpha = (np.ones((HEADS, 1)) if weights is None
             else ops.convert_to_numpy(weights).astype("float64"))
    high = np.zeros(MAX_LENGTH)
    high[:2] = 1.0
    for i, synthesizer in enumerate(layer.synthesizers):
        # Each component carries the spread divided by its mixture weight.
        boost = spread / alpha[:, i] / len(layer.synthesizers)
        if synthesizer.variant in ("random", "fixed_random"):
            value = rng.standard_normal(tuple(synthesizer.kernel.shape))
            value = value + boost[:, None, None] * high[None, None, :]
            synthesizer.kernel.assign(value.astype("float32"))
        else:  # factorized random: a rank-1 term boost * 1 high^T
            left = 0.5 * rng.standard_normal(tuple(synthesizer.left.shape))
            right = 0.5 * rng.standard_normal(tuple(synthesizer.right.shape))
            left[..., 0] = 1.0
            right[..., 0] = boost[:, None] * high[None, :]
            synthesizer.left.assign(left.astype("float32"))
            synthesizer.right.assign(right.astype("float32"))
    return layer


def _spread_masks():
    x, keys, rows, _ = _inputs()
    keys = keys.copy()
    keys[1, :] = True
    keys[1, :4] = False  # example 1 sees only keys 4-6, below keys 0 and 1
    return x, {
        "padding": {"value_mask": keys},
        "padding+causal": {"value_mask": keys, "use_causal_mask": True},
        "query+padding": {"query_mask": rows, "value_mask": keys},
    }


@pytest.mark.parametrize("spread", SPREADS)
@pytest.mark.parametrize("mask", ["padding", "padding+causal",
                                  "query+padding"])
@pytest.mark.parametrize("variant", ["random", "factorized_random",
                                     "fixed_random+factorized_random"])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_spread_logits_match_reference(policy, variant, mask,
                                                       spread, monkeypatch):
    layer = _spread_layer(variant, policy, spread)
    x, masks = _spread_masks()
    kwargs = masks[mask]
    calls = []
    original = general_attention.attend

    def counted(*args, **kw):
        calls.append(1)
        return original(*args, **kw)

    monkeypatch.setattr(general_attention, "attend", counted)
    output = _reference_check(layer, x, **kwargs)
    assert not calls, "the batch-shared path was not taken"
    # Example 1 attends to its own keys, not a zero or a NaN.
    bias = ops.convert_to_numpy(ops.cast(layer.output_dense.bias, "float32"))
    assert np.abs(output[1] - bias).max() > 1e-2


@pytest.mark.parametrize("spread", [17.0, 79.0])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_spread_logits_in_query_blocks(policy, spread,
                                                       monkeypatch):
    """Blocks of 3 query rows (7 > 2 * 3: the layer blocks) run the same
    key-padded products per block."""
    from keras_synth.layers.attention import query_blocks

    calls = []
    blocked = query_blocks.blocked_shared_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return blocked(*args, **kwargs)

    monkeypatch.setattr(query_blocks, "QUERY_BLOCK", 3)
    monkeypatch.setattr(query_blocks, "blocked_shared_attention", counting)
    layer = _spread_layer("random", policy, spread)
    x, masks = _spread_masks()
    _reference_check(layer, x, **masks["padding+causal"])
    assert calls, "the query blocks were not used"


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_spread_fallback_matches_reference(policy):
    """Past a spread of 80 the per-example fallback runs: exact too."""
    layer = _spread_layer("random", policy, 200.0)
    x, masks = _spread_masks()
    _reference_check(layer, x, **masks["padding"])
