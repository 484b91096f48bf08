"""Tests of `SynthesizerAttention`: values, masks, properties, errors, round trips."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import VARIANTS as PACKAGE_VARIANTS
from keras_synth.layers import SynthesizerAttention
from tests.backend_utils import gradients
from tests.layers import layer_harness as harness
from tests.layers.numpy_reference import assert_within
from tests.layers.numpy_reference import reference_attention
from tests.layers.numpy_reference import tolerances

BACKEND = keras.backend.backend()
VARIANTS = list(PACKAGE_VARIANTS)
MIXTURES = list(harness.MIXTURES)
ALL = VARIANTS + MIXTURES
BATCH_INDEPENDENT = list(harness.BATCH_INDEPENDENT)

B, T, S, D, H, K, L = 2, 5, 7, 12, 3, 4, 8


@pytest.fixture(autouse=True)
def _seed():
    """Initial weights are random: seed them so every run is the same."""
    keras.utils.set_random_seed(1234)


def make_layer(synthesizer, **kwargs):
    kwargs.setdefault("max_length", L)
    kwargs.setdefault("seed", 1)
    return SynthesizerAttention(
        num_heads=kwargs.pop("num_heads", H),
        key_dim=kwargs.pop("key_dim", K),
        synthesizer=synthesizer,
        **kwargs,
    )


randomize = harness.randomize


def inputs(batch=B, length_q=T, length_s=S, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(batch, length_q, D)).astype("float32")
    v = rng.normal(size=(batch, length_s, D)).astype("float32")
    return q, v


def scores_of(layer, query, value, **kwargs):
    _, scores = layer(query, value, return_attention_scores=True, **kwargs)
    return ops.convert_to_numpy(scores)


def padding(lengths, length):
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("synthesizer", ALL)
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "all"])
def test_matches_numpy_reference(synthesizer, masks):
    layer = make_layer(synthesizer)
    q, v = inputs()
    kwargs = {}
    if masks in ("padding", "all"):
        kwargs["query_mask"] = padding([T, 3], T)
        kwargs["value_mask"] = padding([S, 4], S)
    if masks in ("causal", "all"):
        kwargs["use_causal_mask"] = True
    if masks == "all":
        rng = np.random.default_rng(3)
        kwargs["attention_mask"] = rng.random((B, T, S)) < 0.8
    layer(q, v)  # build
    randomize(layer)
    out, scores = layer(q, v, return_attention_scores=True, **kwargs)
    ref_out, ref_probs = reference_attention(layer, q, v, **kwargs)
    np.testing.assert_allclose(
        ops.convert_to_numpy(scores), ref_probs, atol=1e-5, rtol=1e-4
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), ref_out, atol=1e-4, rtol=1e-4
    )
    # Without scores the fast paths run (the batch-shared path, late
    # zeroing of empty rows, the fused mixture): the same reference.
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(q, v, **kwargs)), ref_out,
        atol=1e-4, rtol=1e-4,
    )


@pytest.mark.parametrize("synthesizer", ["random", "dense+vanilla"])
def test_cross_attention_with_separate_key(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs()
    k = np.random.default_rng(5).normal(size=(B, S, 6)).astype("float32")
    layer(q, v, k)
    randomize(layer)
    out = layer(q, v, key=k, value_mask=padding([S, 2], S))
    ref_out, _ = reference_attention(
        layer, q, v, key=k, value_mask=padding([S, 2], S)
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), ref_out, atol=1e-4, rtol=1e-4
    )


def _copy_mha_weights(mha, layer):
    vanilla = layer.synthesizers[0]
    pairs = [
        (mha.query_dense, vanilla.query_dense),
        (mha.key_dense, vanilla.key_dense),
        (mha.value_dense, layer.value_dense),
        (mha.output_dense, layer.output_dense),
    ]
    for source, target in pairs:
        for s, t in zip(source.weights, target.weights):
            assert tuple(s.shape) == tuple(t.shape), (s.path, t.path)
            t.assign(s.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"use_causal_mask": True},
        {"value_mask": padding([S, 3], S)},
        {"attention_mask": np.tril(np.ones((B, T, S), bool))},
    ],
    ids=["no_mask", "causal", "padding", "attention_mask"],
)
def test_vanilla_equals_multi_head_attention(kwargs):
    q, v = inputs()
    mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K)
    expected = mha(q, v, **kwargs)
    layer = SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="vanilla")
    layer(q, v)
    _copy_mha_weights(mha, layer)
    actual = layer(q, v, **kwargs)
    np.testing.assert_allclose(
        ops.convert_to_numpy(actual),
        ops.convert_to_numpy(expected),
        atol=1e-5,
        rtol=1e-5,
    )


@pytest.mark.parametrize("synthesizer", ["random", "dense+vanilla"])
def test_broadcastable_attention_mask(synthesizer):
    """A `(B, 1, S)` attention mask broadcasts over queries, as in MHA."""
    layer = make_layer(synthesizer)
    q, v = inputs()
    keys = padding([S, 4], S)
    out = layer(q, v, attention_mask=keys[:, None, :])
    expected = layer(q, v, value_mask=keys)
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), ops.convert_to_numpy(expected), atol=1e-6
    )


def test_keras_masks_reach_the_layer():
    """Masks from an Embedding(mask_zero=True) act like explicit masks."""
    tokens = np.array([[3, 4, 5, 0, 0], [1, 2, 0, 0, 0]])
    embed = keras.layers.Embedding(10, D, mask_zero=True)
    layer = make_layer("random")
    x = embed(tokens)
    out_keras = ops.convert_to_numpy(layer(x, x))
    mask = tokens != 0
    x_plain = embed(tokens)
    out_explicit = ops.convert_to_numpy(
        layer(x_plain, x_plain, query_mask=mask, value_mask=mask)
    )
    np.testing.assert_allclose(out_keras, out_explicit, atol=1e-6)
    out_none = ops.convert_to_numpy(
        layer(ops.convert_to_tensor(ops.convert_to_numpy(x_plain)),
              ops.convert_to_tensor(ops.convert_to_numpy(x_plain)))
    )
    assert not np.allclose(out_none[1, :2], out_keras[1, :2], atol=1e-4)


# ------------------------------------------------------------ properties


@pytest.mark.parametrize("synthesizer", BATCH_INDEPENDENT)
def test_synthetic_scores_do_not_depend_on_input(synthesizer):
    layer = make_layer(synthesizer)
    q1, v1 = inputs(seed=1)
    q2, v2 = inputs(seed=2)
    s1 = scores_of(layer, q1, v1)
    s2 = scores_of(layer, q2, v2)
    np.testing.assert_allclose(s1, s2, atol=1e-7)
    np.testing.assert_allclose(s1[0], s1[1], atol=1e-7)


@pytest.mark.parametrize("synthesizer", ["dense", "factorized_dense"])
def test_dense_row_depends_only_on_its_query_token(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs()
    base = scores_of(layer, q, v)
    changed_q = q.copy()
    changed_q[:, 2] += 1.0
    changed = scores_of(layer, changed_q, v)
    rows_changed = np.abs(changed - base).max(axis=(0, 1, 3)) > 1e-6
    assert rows_changed.tolist() == [t == 2 for t in range(T)]
    # Keys and values do not enter the logits.
    _, v2 = inputs(seed=9)
    np.testing.assert_allclose(scores_of(layer, q, v2), base, atol=1e-7)


@pytest.mark.parametrize("synthesizer", ALL)
def test_causal_rows_put_zero_weight_on_the_future(synthesizer):
    layer = make_layer(synthesizer)
    q, _ = inputs(length_q=6)
    scores = scores_of(layer, q, q, use_causal_mask=True)
    future = np.triu(np.ones((6, 6), bool), k=1)
    assert np.all(scores[..., future] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("synthesizer", ALL)
def test_padded_keys_get_zero_weight(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs()
    mask = padding([S, 3], S)
    scores = scores_of(layer, q, v, value_mask=mask)
    assert np.all(scores[1, :, :, 3:] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("synthesizer", ALL)
def test_fully_masked_rows_give_zeros_not_nan(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs()
    attention_mask = np.ones((B, T, S), bool)
    attention_mask[0, 1] = False
    out, scores = layer(
        q, v, attention_mask=attention_mask, return_attention_scores=True
    )
    out, scores = ops.convert_to_numpy(out), ops.convert_to_numpy(scores)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(scores))
    assert np.all(scores[0, :, 1] == 0.0)
    # The row's output is the output projection's bias alone.
    bias = ops.convert_to_numpy(layer.output_dense.bias)
    np.testing.assert_allclose(out[0, 1], bias, atol=1e-6)


def test_factorized_random_logits_have_rank_at_most_r():
    rank = 3
    layer = make_layer("factorized_random", max_length=12,
                       synthesizer_options={"rank": rank})
    q, v = inputs(length_q=12, length_s=12)
    layer(q, v)
    logits = ops.convert_to_numpy(
        layer.synthesizers[0].logits(q, None, 0, 12, 12)
    )
    assert logits.shape == (H, 12, 12)
    for head in logits:
        assert np.linalg.matrix_rank(head, tol=1e-4) <= rank


@pytest.mark.parametrize("synthesizer", MIXTURES)
def test_mixture_weights_are_normalised_and_learned(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs()
    layer(q, v)
    n = len(layer.variants)
    weights = ops.convert_to_numpy(layer.mixture_weights())
    assert weights.shape == (H, n)
    np.testing.assert_allclose(weights, 1.0 / n, atol=1e-7)  # start equal
    randomize(layer)
    weights = ops.convert_to_numpy(layer.mixture_weights())
    assert np.all(weights > 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    target = ops.convert_to_tensor(
        np.random.default_rng(0).normal(size=(B, T, D)), "float32"
    )

    def loss():
        return ops.mean(ops.square(layer(q, v) - target))

    (grad,) = gradients(loss, [layer._mixture_logits])
    assert np.all(np.abs(grad) > 0)


@pytest.mark.parametrize("synthesizer", ALL)
def test_every_trainable_weight_gets_a_gradient(synthesizer):
    layer = make_layer(synthesizer)
    q, v = inputs(length_q=L, length_s=L)
    layer(q, v)
    randomize(layer)
    target = ops.convert_to_tensor(
        np.random.default_rng(0).normal(size=(B, L, D)), "float32"
    )

    def loss():
        return ops.mean(ops.square(layer(q, v) - target))

    grads = gradients(loss, layer.trainable_weights)
    for w, g in zip(layer.trainable_weights, grads):
        assert np.any(np.abs(g) > 0), f"no gradient reaches {w.path}"
    names = [w.path for w in layer.non_trainable_weights]
    if "fixed_random" in layer.variants:
        assert any(n.endswith("fixed_random/logits") for n in names)
    else:
        assert names == []


def test_fixed_random_is_never_trained():
    layer = make_layer("fixed_random+random")
    q, v = inputs()
    model = _model(layer)
    fixed = layer.synthesizers[0].kernel
    trained = layer.synthesizers[1].kernel
    before_fixed = ops.convert_to_numpy(fixed).copy()
    before_trained = ops.convert_to_numpy(trained).copy()
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
    model.fit(q, np.ones((B, T, D)), epochs=2, verbose=0)
    np.testing.assert_array_equal(ops.convert_to_numpy(fixed), before_fixed)
    assert not np.allclose(ops.convert_to_numpy(trained), before_trained)


@pytest.mark.parametrize("synthesizer", VARIANTS + ["random+vanilla"])
def test_parameter_count_matches_formula(synthesizer):
    d, heads, k, ell, r = D, H, K, L, 8
    a, b = 3, 3  # default for max_length 8: ceil(sqrt(8)) = 3, ceil(8/3) = 3
    per_head = {  # kernels, then biases (use_bias=True)
        "vanilla": 2 * d * k + 2 * k,
        "dense": d * k + k * ell + k + ell,
        "random": ell * ell,
        "fixed_random": 0,
        "factorized_dense": d * k + k * (a + b) + k + a + b,
        "factorized_random": 2 * ell * r,
    }
    variants = synthesizer.split("+")
    expected = heads * sum(per_head[v] for v in variants)
    if len(variants) > 1:
        expected += heads * len(variants)
    expected += d * heads * k + heads * k  # value projection
    expected += heads * k * d + d  # output projection
    layer = make_layer(synthesizer)
    layer(*inputs())
    count = sum(int(np.prod(w.shape)) for w in layer.trainable_weights)
    assert count == expected
    if synthesizer == "fixed_random":
        frozen = sum(int(np.prod(w.shape)) for w in layer.non_trainable_weights)
        assert frozen == heads * ell * ell


def test_variable_lengths_in_successive_calls():
    layer = make_layer("random+dense")
    for t, s in [(3, 5), (8, 8), (1, 2), (6, 4)]:
        q, v = inputs(length_q=t, length_s=s)
        out, scores = layer(q, v, return_attention_scores=True)
        assert tuple(out.shape) == (B, t, D)
        assert tuple(scores.shape) == (B, H, t, s)
    # A shorter sequence uses the leading block of R (slice, never resize).
    layer = make_layer("random")
    q, v = inputs(length_q=3, length_s=4)
    scores = scores_of(layer, q, v)
    logits = ops.convert_to_numpy(layer.synthesizers[0].kernel)[:, :3, :4]
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(scores[0], expected, atol=1e-6)


def test_output_shape_and_value_dim():
    layer = make_layer("dense", value_dim=5, output_shape=(2, 3))
    q, v = inputs()
    out = layer(q, v)
    assert tuple(out.shape) == (B, T, 2, 3)
    ref, _ = reference_attention(layer, q, v)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref, atol=1e-4)


# ---------------------------------------------------------- mixed precision


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("synthesizer", ["dense", "random+vanilla", "random"])
def test_mixed_precision(policy, synthesizer):
    layer = make_layer(synthesizer, dtype=policy)
    q, v = inputs()
    layer(q, v)
    randomize(layer, seed=4)
    compute = "float16" if policy == "mixed_float16" else "bfloat16"
    # Large but ordinary inputs: logits and softmax in float32, no overflow.
    out, scores = layer(q * 30.0, v * 30.0, return_attention_scores=True)
    assert keras.backend.standardize_dtype(out.dtype) == compute
    assert keras.backend.standardize_dtype(scores.dtype) == compute
    for x in (out, scores):
        assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(x, "float32"))))
    for synthesizer_layer in layer.synthesizers:
        for w in synthesizer_layer.weights:
            if "hidden" in w.path or "vanilla" in w.path:
                continue  # EinsumDense projections follow the policy.
            assert keras.backend.standardize_dtype(w.dtype) == "float32"
    # The result equals the float64 reference of the same weights within
    # per-element tolerances from the policy's dtypes (the compute dtype's
    # epsilon on the value path and the projected logits, float32's on the
    # random logits and the softmax: `numpy_reference.tolerances`), not a
    # share of the largest output. The tolerances bound the rounding by the
    # magnitudes of the terms summed; with non-negative weights and inputs
    # nothing cancels, the terms' magnitude is the output's own, and the
    # bound is a few epsilons of each element (4 eps for random).
    for weight in layer.weights:
        weight.assign(0.6 * ops.abs(weight.value))
    q, v = np.abs(q), np.abs(v)
    out = ops.convert_to_numpy(ops.cast(layer(q, v), "float32"))
    expected, _ = reference_attention(layer, q, v)
    output_tol, _, _ = tolerances(layer, q, v)
    assert_within(out, expected, output_tol, "output")


# ------------------------------------------------------------------ errors


def test_error_sequence_longer_than_max_length():
    layer = make_layer("random", max_length=6)
    q, v = inputs(length_q=7, length_s=5)
    with pytest.raises(ValueError, match=r"query sequence length 7 exceeds max_length=6"):
        layer(q, v)
    q, v = inputs(length_q=4, length_s=9)
    with pytest.raises(ValueError, match=r"key/value sequence length 9 exceeds max_length=6"):
        layer(q, v)


@pytest.mark.parametrize(
    "synthesizer, message",
    [
        ("rnd", r"Unknown variant 'rnd' in argument `synthesizer`"),
        ("random+vanila", r"Unknown variant 'vanila'"),
        ("random+random", r"names \['random'\] more than once"),
        (["dense", "vanilla", "dense"], r"names \['dense'\] more than once"),
        ("", r"Unknown variant ''"),
        (3, r"invalid value for argument `synthesizer`"),
    ],
)
def test_error_bad_synthesizer(synthesizer, message):
    with pytest.raises(ValueError, match=message):
        SynthesizerAttention(num_heads=2, key_dim=4, synthesizer=synthesizer,
                             max_length=8)


@pytest.mark.parametrize("synthesizer", ["random", "dense+vanilla"])
def test_error_max_length_missing(synthesizer):
    with pytest.raises(ValueError, match=r"`max_length` is required.*max_length=None"):
        SynthesizerAttention(num_heads=2, key_dim=4, synthesizer=synthesizer)
    # Pure vanilla needs none.
    SynthesizerAttention(num_heads=2, key_dim=4, synthesizer="vanilla")


def test_error_factorized_sizes():
    with pytest.raises(ValueError, match=r"`sizes` of 'factorized_dense' cannot cover max_length=20.*\(4, 4\)"):
        SynthesizerAttention(num_heads=2, key_dim=4, max_length=20,
                             synthesizer="factorized_dense",
                             synthesizer_options={"sizes": (4, 4)})
    with pytest.raises(ValueError, match=r"`rank` of 'factorized_random'.*rank=0"):
        SynthesizerAttention(num_heads=2, key_dim=4, max_length=20,
                             synthesizer="factorized_random",
                             synthesizer_options={"rank": 0})
    with pytest.raises(ValueError, match=r"`num_heads`.*num_heads=0"):
        SynthesizerAttention(num_heads=0, key_dim=4, max_length=20)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"value_mask": np.ones((B, S + 1), bool)}, r"`value_mask` has the wrong shape.*\(2, 8\)"),
        ({"query_mask": np.ones((B, S), bool)}, r"`query_mask` has the wrong shape.*\(2, 7\)"),
        ({"attention_mask": np.ones((B, S, T), bool)}, r"`attention_mask` has the wrong shape.*\('batch', 5, 7\).*\(2, 7, 5\)"),
        ({"attention_mask": np.ones((S, T), bool)}, r"`attention_mask` has the wrong shape.*\(5, 7\).*\(7, 5\)"),
        ({"attention_mask": np.ones((B, H + 1, T, S), bool)}, r"`attention_mask` has the wrong shape.*\('batch', 3, 5, 7\).*\(2, 4, 5, 7\)"),
        ({"attention_mask": np.ones((T,), bool)}, r"`attention_mask` has the wrong rank.*\(5,\)"),
    ],
)
def test_error_mask_of_wrong_shape(kwargs, message):
    layer = make_layer("dense")
    q, v = inputs()
    with pytest.raises(ValueError, match=message):
        layer(q, v, **kwargs)


# ------------------------------------------------------------- round trips


def _model(layer, length=T, causal=False):
    x = keras.Input((length, D))
    y = layer(x, x, use_causal_mask=causal)
    return keras.Model(x, keras.layers.Dense(D)(y))


@pytest.mark.parametrize("synthesizer", ALL)
def test_config_round_trip(synthesizer):
    layer = make_layer(
        synthesizer,
        dropout=0.1,
        value_dim=3,
        output_shape=6,
        synthesizer_options={"rank": 2} if "factorized_random" in synthesizer
        else None,
        kernel_regularizer="l2",
    )
    config = layer.get_config()
    clone = SynthesizerAttention.from_config(config)
    assert clone.get_config() == config
    assert clone.synthesizer == synthesizer
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert isinstance(revived, SynthesizerAttention)
    assert revived.get_config() == config


@pytest.mark.parametrize("synthesizer", ALL)
def test_layer_harness(synthesizer, tmp_path):
    """Build, call, config and .keras round trips, fit, mixed precision and
    a compiled call (tests/layers/layer_harness.py)."""
    q, v = inputs()
    harness.run_layer_test(
        SynthesizerAttention,
        dict(num_heads=H, key_dim=K, synthesizer=synthesizer, max_length=L,
             value_dim=3, output_shape=6, seed=1),
        (q, v),
        call_kwargs={"value_mask": padding([S, 4], S)},
        expected_output_shape=(B, T, 6),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("synthesizer", ["random+vanilla", "dense", "factorized_dense"])
def test_saved_model_export_with_other_batch_and_length(synthesizer, tmp_path):
    harness.skip_unless_saved_model_export()
    import tensorflow as tf

    # JAX exports through jax2tf's shape polymorphism, which cannot prove
    # that a symbolic length fits the max_length x max_length synthesized
    # weights it slices: the length is fixed there, the batch still varies.
    lengths = [L] if BACKEND == "jax" else [3, L]
    x = keras.Input((None if BACKEND != "jax" else L, D))
    layer = make_layer(synthesizer)
    model = keras.Model(x, layer(x, x, use_causal_mask=True))
    model(inputs(length_q=lengths[-1])[0])
    randomize(layer)
    path = str(tmp_path / "export")
    model.export(path)
    reloaded = tf.saved_model.load(path)
    for batch, length in zip([1, 4], [lengths[0], lengths[-1]]):
        q, _ = inputs(batch=batch, length_q=length)
        np.testing.assert_allclose(
            reloaded.serve(tf.constant(q)).numpy(),
            ops.convert_to_numpy(model(q)),
            atol=1e-5,
        )


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.function shapes are TensorFlow-only")
def test_unknown_lengths_under_tf_function():
    import tensorflow as tf

    layer = make_layer("random+dense")
    layer(*inputs())
    spec = tf.TensorSpec((None, None, D), tf.float32)
    fn = tf.function(lambda q, v: layer(q, v), input_signature=[spec, spec])
    for t, s in [(2, 3), (L, L)]:
        q, v = inputs(length_q=t, length_s=s)
        np.testing.assert_allclose(
            fn(q, v).numpy(), ops.convert_to_numpy(layer(q, v)), atol=1e-5
        )
    # Longer than max_length: the layer's own error at run time (the
    # length is unknown while tracing), naming max_length and the length,
    # before any slice of the synthesized logits runs; never truncation.
    for t, s, message in [
        (L + 1, 3, f"The query sequence length {L + 1} exceeds "
                   f"max_length={L}."),
        (2, L + 3, f"The key/value sequence length {L + 3} exceeds "
                   f"max_length={L}."),
    ]:
        q, v = inputs(length_q=t, length_s=s)
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            fn(q, v)
        assert message in str(error.value)


@pytest.mark.parametrize("synthesizer", ["random", "dense+vanilla", "factorized_random"])
def test_fit_under_jit_compile_reduces_loss(synthesizer):
    layer = make_layer(synthesizer, max_length=T)
    model = _model(layer, causal=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, T, D)).astype("float32")
    y = np.roll(x, 1, axis=1) * 0.5
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss="mse",
        jit_compile=BACKEND in ("tensorflow", "jax"),
    )
    history = model.fit(x, y, batch_size=8, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses


def test_dropout_is_active_only_in_training():
    layer = make_layer("random", dropout=0.5)
    q, v = inputs()
    inference = ops.convert_to_numpy(layer(q, v, training=False))
    np.testing.assert_allclose(
        inference, ops.convert_to_numpy(layer(q, v)), atol=1e-7
    )
    trained = ops.convert_to_numpy(layer(q, v, training=True))
    assert not np.allclose(trained, inference, atol=1e-4)
    # Batch entries get their own dropout masks even though R is shared.
    same = np.repeat(q[:1], 2, axis=0)
    dropped = ops.convert_to_numpy(layer(same, same, training=True))
    assert not np.allclose(dropped[0], dropped[1], atol=1e-4)


def test_exports_and_version():
    import keras_synth

    assert keras_synth.SynthesizerAttention is SynthesizerAttention
    assert keras_synth.layers.SynthesizerAttention is SynthesizerAttention
    assert isinstance(keras_synth.__version__, str)
    assert keras.saving.get_registered_object(
        "keras_synth>SynthesizerAttention"
    ) is SynthesizerAttention


@pytest.mark.parametrize("synthesizer", ["random", "random+vanilla"])
def test_initial_cache_shapes_and_errors(synthesizer):
    layer = make_layer(synthesizer)
    cache = layer.initial_cache(3)
    slots = 2 if "vanilla" in synthesizer else 1
    assert tuple(cache.shape) == (3, slots, L, H, K)
    assert np.all(ops.convert_to_numpy(cache) == 0)
    assert tuple(layer.initial_cache(2, 5).shape) == (2, slots, 5, H, K)
    with pytest.raises(ValueError, match=r"`max_length`=9 of `initial_cache` exceeds the layer's max_length=8"):
        layer.initial_cache(2, L + 1)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.function shapes are TensorFlow-only")
def test_initial_cache_with_a_length_known_only_at_run_time():
    import tensorflow as tf

    layer = make_layer("random")
    fn = tf.function(lambda n: layer.initial_cache(2, n))
    assert tuple(fn(tf.constant(5)).shape) == (2, 1, 5, H, K)
