"""Numerics of `SynthesizerAttention` under stress.

- Gradients of every variant (and mixtures) agree with central finite
  differences in float64, for weights and inputs, with and without a causal
  mask, through a padded key that the causal mask does not hide (it gets a
  zero gradient) and fully masked query rows.
- Extreme values: random logits of magnitude up to 1e4 (set directly; above
  4e3 reached by training, where the saturated softmax stops their growth),
  large inputs, masked rows: outputs, attention scores
  and gradients stay finite in float32 and under mixed precision, and match
  the float64 NumPy reference, with attention scores (the general path) and
  without (the fast path of batch-independent variants).
- Mixed precision and pure float16/bfloat16: output dtypes, float32 logit
  weights, agreement with the reference within per-element tolerances from
  the dtypes (`numpy_reference.tolerances`).
- Determinism: two short `fit` runs with the same seed give identical
  weights.
"""

import contextlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import synthesizers as synth_lib
from tests.layers.numpy_reference import assert_within
from tests.layers.numpy_reference import combined_mask
from tests.layers.numpy_reference import layer_weights
from tests.layers.numpy_reference import reference_attention
from tests.layers.numpy_reference import tolerances
from tests.layers.stress_utils import gradients
from tests.layers.stress_utils import run_layer

pytestmark = pytest.mark.filterwarnings(
    "ignore:You are using a softmax over axis")

BACKEND = keras.backend.backend()
VARIANTS = list(synth_lib.VARIANTS)
MIXTURES = ["random+vanilla", "dense+vanilla", "random+dense",
            "factorized_random+factorized_dense+fixed_random"]
ALL = VARIANTS + MIXTURES
WITH_RANDOM = ["random", "fixed_random", "factorized_random",
               "random+vanilla", "random+dense"]
MIXED_POLICIES = ["mixed_float16", "mixed_bfloat16"]

# Tiny shapes: batch, query length, key length, width, heads, max_length.
B, T, S, D, H, L = 2, 3, 4, 3, 2, 4


@contextlib.contextmanager
def float64_enabled():
    """JAX truncates float64 to float32 unless x64 is enabled."""
    if BACKEND == "jax":
        import jax

        with jax.enable_x64(True):
            yield
    else:
        yield


def _weight_name(weight):
    return weight.path.split("/")[-1]


def make_layer(synthesizer, dtype="float32", seed=0, build=True, **kwargs):
    """A tiny layer with NumPy-drawn weights (biases and mixture included)."""
    layer = SynthesizerAttention(
        num_heads=H, key_dim=2, value_dim=3, synthesizer=synthesizer,
        max_length=L, dtype=dtype, kernel_initializer="zeros",
        synthesizer_options={
            "random": {"initializer": "zeros"},
            "fixed_random": {"initializer": "zeros"},
            "factorized_random": {"rank": 2, "initializer": "zeros"}},
        **kwargs)
    if build:
        layer.build((B, T, D), (B, S, D))
        rng = np.random.default_rng(seed)
        for weight in layer.weights:
            weight.assign(rng.standard_normal(tuple(weight.shape)).astype(
                "float32") * 0.7)
    return layer


def make_inputs(dtype="float32", seed=1, scale=1.0):
    rng = np.random.default_rng(seed)
    query = (scale * rng.standard_normal((B, T, D))).astype(dtype)
    value = (scale * rng.standard_normal((B, S, D))).astype(dtype)
    return query, value


# Example 0: the first key is padding, which a causal mask does not hide
# (under a causal mask the first query row of example 0 is then fully
# masked). Example 1: the second query row is padding, so that row is fully
# masked.
VALUE_MASK = np.array([[False, True, True, True], [True] * S])
QUERY_MASK = np.array([[True] * T, [True, False, True]])


def _numpy(x):
    return ops.convert_to_numpy(ops.cast(x, "float32")).astype("float64")


def _sample_indices(shape, rng, limit=4):
    size = int(np.prod(shape))
    flat = np.arange(size) if size <= limit else rng.choice(
        size, limit, replace=False)
    return [np.unravel_index(i, shape) for i in flat]


def _loss_evaluator(loss_fn, variables):
    """`evaluate(i, value)`: the loss with variable `i` set to `value`."""
    if BACKEND == "jax":
        import jax

        @jax.jit
        def stateless_loss(values):
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values))
            ):
                return loss_fn()

        base = [v.value for v in variables]

        def evaluate(i, value):
            values = list(base)
            values[i] = jax.numpy.asarray(value)
            return float(stateless_loss(values))

        return evaluate

    def evaluate(i, value):
        old = ops.convert_to_numpy(variables[i].value)
        variables[i].assign(value)
        try:
            return float(ops.convert_to_numpy(loss_fn()))
        finally:
            variables[i].assign(old)

    return evaluate


@pytest.mark.parametrize("use_causal_mask", [True, False])
@pytest.mark.parametrize("synthesizer", ALL)
def test_gradients_match_finite_differences_float64(synthesizer,
                                                    use_causal_mask):
    with float64_enabled():
        layer = make_layer(synthesizer, dtype="float64")
        query, value = make_inputs("float64")
        query_var = keras.Variable(query, dtype="float64", name="query")
        value_var = keras.Variable(value, dtype="float64", name="value")
        rng = np.random.default_rng(2)
        target = keras.ops.convert_to_tensor(
            rng.standard_normal((B, T, D)), dtype="float64")

        def loss_fn():
            output = layer(query_var.value, value_var.value,
                           query_mask=QUERY_MASK, value_mask=VALUE_MASK,
                           use_causal_mask=use_causal_mask)
            return ops.sum(output * target)

        variables = list(layer.weights) + [query_var, value_var]
        assert all(
            keras.backend.standardize_dtype(v.dtype) == "float64"
            for v in variables
        )
        analytic = gradients(loss_fn, variables)
        evaluate = _loss_evaluator(loss_fn, variables)
        eps = 1e-6
        checked = 0
        for i, variable in enumerate(variables):
            base = ops.convert_to_numpy(variable.value).astype("float64")
            for index in _sample_indices(base.shape, rng):
                plus, minus = base.copy(), base.copy()
                plus[index] += eps
                minus[index] -= eps
                numeric = (evaluate(i, plus) - evaluate(i, minus)) / (2 * eps)
                np.testing.assert_allclose(
                    analytic[i][index], numeric, rtol=1e-5, atol=1e-7,
                    err_msg=f"d loss / d {variable.path}{list(index)}",
                )
                checked += 1
        assert checked > 20, checked
        # The padded key (key 0 of example 0, which every query row could
        # attend without the padding) gets no gradient: its value (and key)
        # does not matter. Nor does the padded query row of example 1.
        query_grad, value_grad = analytic[-2], analytic[-1]
        np.testing.assert_array_equal(value_grad[0, 0], 0.0)
        np.testing.assert_array_equal(query_grad[1, 1], 0.0)
        # The other keys do get gradients (the zero above is the padding's):
        # the last key only without the causal mask, which hides it from
        # every query row (T < S).
        assert np.all(np.abs(value_grad[0, 1:3]).max(axis=-1) > 0)
        assert np.all(np.abs(value_grad[1]).max(axis=-1)[:3] > 0)
        last_key = np.abs(value_grad[:, 3]).max()
        assert (last_key == 0.0) if use_causal_mask else (last_key > 0.0)


def _set_random_logits(layer, magnitude, seed=0):
    """Random logits (and factors) of magnitude `magnitude` (|R| up to it)."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        name = _weight_name(weight)
        shape = tuple(weight.shape)
        if name == "logits":
            values = magnitude * rng.uniform(-1.0, 1.0, shape)
            values.flat[0] = magnitude  # the extreme itself
            weight.assign(values.astype("float32"))
        elif name in ("left", "right"):
            # (R1 R2^T) entries up to `magnitude`: rank 2, factors sqrt(M/2).
            factor = np.sqrt(magnitude / 2.0)
            weight.assign((factor * rng.uniform(-1.0, 1.0, shape)).astype(
                "float32"))


def _check_finite_and_reference(layer, query, value, compute_dtype,
                                **kwargs):
    """Checks both paths against the reference: with attention scores (the
    general path) and without (batch-independent variants' fast path)."""
    expected, expected_probs = reference_attention(layer, query, value,
                                                   **kwargs)
    output_tol, probs_tol, _ = tolerances(layer, query, value, **kwargs)
    output, scores = run_layer(layer, query, value,
                               return_attention_scores=True, **kwargs)
    fast_output = run_layer(layer, query, value, **kwargs)
    for result in (output, scores, fast_output):
        assert keras.backend.standardize_dtype(result.dtype) == compute_dtype
    output, scores = _numpy(output), _numpy(scores)
    fast_output = _numpy(fast_output)
    assert np.all(np.isfinite(output)), "non-finite output"
    assert np.all(np.isfinite(fast_output)), "non-finite output (no scores)"
    assert np.all(np.isfinite(scores)), "non-finite attention scores"
    assert_within(output, expected, output_tol, "output with scores")
    assert_within(fast_output, expected, output_tol, "output without scores")
    assert_within(scores, expected_probs, probs_tol, "attention scores")
    mask = combined_mask(query.shape[0], query.shape[1], value.shape[1],
                         **kwargs)
    if mask is not None:
        assert np.all(np.broadcast_to(mask[:, None], scores.shape)
                      | (scores == 0.0))


def _check_finite_gradients(layer, query, value, **kwargs):
    variables = list(layer.trainable_weights)

    # A mean keeps the upstream gradient small: what is checked is that the
    # layer itself (saturated softmax, masks) creates no inf/NaN, not that
    # float16 can hold an arbitrary loss (loss scaling's job).
    def loss_fn():
        output = layer(query, value, **kwargs)
        return ops.mean(ops.cast(output, "float32"))

    for variable, grad in zip(variables, gradients(loss_fn, variables)):
        assert np.all(np.isfinite(grad)), f"non-finite gradient of {variable.path}"


@pytest.mark.parametrize("policy", ["float32"] + MIXED_POLICIES)
@pytest.mark.parametrize("synthesizer", WITH_RANDOM)
def test_large_random_logits_stay_finite(synthesizer, policy):
    magnitude = 1e4
    layer = make_layer(synthesizer, dtype=policy)
    _set_random_logits(layer, magnitude)
    weights = layer_weights(layer)
    synthetic = [np.abs(w).max() for n, w in weights.items()
                 if n.endswith("/logits")]
    if "factorized_random/left" in weights:
        synthetic.append(np.abs(np.einsum(
            "ntr,nsr->nts", weights["factorized_random/left"],
            weights["factorized_random/right"])).max())
    assert max(synthetic) >= magnitude / 4
    query, value = make_inputs()
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    kwargs = dict(query_mask=QUERY_MASK, value_mask=VALUE_MASK,
                  use_causal_mask=True)
    _check_finite_and_reference(layer, query, value, compute_dtype, **kwargs)
    _check_finite_gradients(layer, query, value, **kwargs)


# Largest input magnitude per compute dtype: float16 overflows past 65504 in
# any projection (the value and output projections run in the compute
# dtype), so float16 inputs stay at 1e2; float32 and bfloat16 share float32's
# range.
INPUT_SCALE = {"float32": 1e4, "bfloat16": 1e4, "float16": 1e2}


@pytest.mark.parametrize("policy", ["float32"] + MIXED_POLICIES)
@pytest.mark.parametrize("synthesizer", ALL)
def test_large_inputs_stay_finite(synthesizer, policy):
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    layer = make_layer(synthesizer, dtype=policy)
    query, value = make_inputs(scale=INPUT_SCALE[compute_dtype])
    kwargs = dict(query_mask=QUERY_MASK, value_mask=VALUE_MASK)
    _check_finite_and_reference(layer, query, value, compute_dtype, **kwargs)
    _check_finite_gradients(layer, query, value, **kwargs)


def test_huge_dot_product_logits_keep_masked_keys_at_zero():
    # Dot-product logits far below -1e9 for every key: a mask implemented by
    # *replacing* masked logits with -1e9 would give the masked keys all the
    # weight. Masked keys must keep zero weight and rows must sum to one.
    layer = make_layer("vanilla")
    for weight in layer.weights:
        name = weight.path
        if name.endswith("query/kernel"):
            weight.assign(np.full(tuple(weight.shape), 1.0, "float32"))
        elif name.endswith("key/kernel"):
            weight.assign(np.full(tuple(weight.shape), -1.0, "float32"))
        elif name.endswith("bias"):
            weight.assign(np.zeros(tuple(weight.shape), "float32"))
    query = np.full((B, T, D), 1e4, "float32")
    value = np.full((B, S, D), 1e4, "float32")
    value[:, :, 0] += np.arange(S) * 10.0  # distinct logits per key
    _, scores = run_layer(layer, query, value, value_mask=VALUE_MASK,
                          return_attention_scores=True)
    scores = _numpy(scores)
    assert np.all(scores[0, :, :, 0] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
    _check_finite_and_reference(layer, query, value, "float32",
                                value_mask=VALUE_MASK)


@pytest.mark.parametrize("policy", ["float32"] + MIXED_POLICIES)
def test_training_to_large_random_logits_stays_finite(policy):
    keras.utils.set_random_seed(0)
    layer = SynthesizerAttention(num_heads=2, key_dim=4, synthesizer="random",
                                 max_length=L, dtype=policy)
    inputs = keras.Input((L, D))
    outputs = keras.layers.Dense(1, dtype=policy)(
        keras.layers.Flatten(dtype=policy)(layer(inputs, inputs)))
    model = keras.Model(inputs, outputs)
    # Only the random logits train, with steps of norm 1e4 (SGD with a huge
    # learning rate and clipped gradients): after a few steps |R| > 4e3, the
    # softmax saturates (its gradients vanish, so |R| stops growing there:
    # more epochs do not take it to 1e4), and nothing may turn inf/NaN.
    for sublayer in (layer.value_dense, layer.output_dense,
                     model.layers[-1]):
        sublayer.trainable = False
    assert [w.path.split("/")[-1] for w in model.trainable_weights] == [
        "logits"]
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=1e4, global_clipnorm=1.0),
        loss="mse")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, L, D)).astype("float32")
    y = 10.0 * rng.standard_normal((16, 1)).astype("float32")
    history = model.fit(x, y, batch_size=8, epochs=4, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    logits = layer_weights(layer)["random/logits"]
    assert np.all(np.isfinite(logits))
    assert np.abs(logits).max() >= 4e3, np.abs(logits).max()
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    kwargs = dict(value_mask=VALUE_MASK[:, :L], use_causal_mask=True)
    _check_finite_and_reference(layer, x[:2], x[:2], compute_dtype, **kwargs)
    _check_finite_gradients(layer, x[:2], x[:2], **kwargs)


# --------------------------------------------------------- mixed precision


# Every variant under both mixed policies; pure float16/bfloat16 (all
# weights outside the logit path in 16 bits) on a mixture of every kind.
LOW_PRECISION_CASES = [
    (synthesizer, policy) for policy in MIXED_POLICIES for synthesizer in ALL
] + [
    (synthesizer, policy) for policy in ("float16", "bfloat16")
    for synthesizer in ("dense+vanilla",
                        "factorized_random+factorized_dense+fixed_random",
                        "random")
]


@pytest.mark.parametrize("synthesizer,policy", LOW_PRECISION_CASES)
def test_low_precision_policies(synthesizer, policy):
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    layer = make_layer(synthesizer, dtype=policy)
    for weight in layer.weights:
        name = weight.path
        logit_path = (
            name.endswith(("/logits", "/left", "/right", "mixture_logits",
                           "dense/kernel", "dense/bias"))
            or "/kernel_" in name or "/bias_" in name
        )
        if logit_path:
            assert keras.backend.standardize_dtype(weight.dtype) == "float32", name
    query, value = make_inputs(dtype="float32")
    kwargs = dict(query_mask=QUERY_MASK, value_mask=VALUE_MASK,
                  use_causal_mask=True)
    _check_finite_and_reference(layer, query, value, compute_dtype, **kwargs)
    _check_finite_gradients(layer, query, value, **kwargs)


@pytest.mark.parametrize("synthesizer", ["dense", "random+vanilla"])
def test_float16_inputs_to_a_float32_layer(synthesizer):
    layer = make_layer(synthesizer)
    query, value = make_inputs(dtype="float16")
    output = run_layer(layer, query, value, value_mask=VALUE_MASK)
    assert keras.backend.standardize_dtype(output.dtype) == "float32"
    expected, _ = reference_attention(layer, query, value,
                                      value_mask=VALUE_MASK)
    output_tol, _, _ = tolerances(layer, query, value, value_mask=VALUE_MASK)
    assert_within(_numpy(output), expected, output_tol, "output")


# ------------------------------------------------------------ determinism


def _short_fit(synthesizer, seed):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((L, D))
    hidden = SynthesizerAttention(
        num_heads=2, key_dim=4, synthesizer=synthesizer, max_length=L,
        dropout=0.2, seed=seed)(inputs, inputs)
    outputs = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(
        hidden))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, L, D)).astype("float32")
    y = rng.standard_normal((32, 1)).astype("float32")
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=True,
                        verbose=0)
    return [ops.convert_to_numpy(w) for w in model.weights], history


# One mixture with a query-dependent, a random and a dot-product part.
@pytest.mark.parametrize("synthesizer", ["dense+factorized_random+vanilla"])
def test_fit_is_deterministic_with_a_fixed_seed(synthesizer):
    weights_a, history_a = _short_fit(synthesizer, seed=7)
    weights_b, history_b = _short_fit(synthesizer, seed=7)
    assert history_a.history["loss"] == history_b.history["loss"]
    for a, b in zip(weights_a, weights_b):
        np.testing.assert_array_equal(a, b)
    # And the seed matters (the test is not vacuous).
    weights_c, _ = _short_fit(synthesizer, seed=8)
    assert any(not np.array_equal(a, c) for a, c in zip(weights_a, weights_c))
