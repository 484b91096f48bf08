"""Property-based tests of `SynthesizerAttention` (Hypothesis).

Hypothesis draws the layer (variant or mixture, heads, key/value dims,
`max_length`, ranks, biases, output shape, dtype policy) and the call (batch
size, query and key lengths from 1 to `max_length`, self- or
cross-attention, separate keys, padding masks, a custom `attention_mask`,
causal masking with a query offset, rows fully masked) and checks:

- outputs and attention probabilities are finite;
- they equal the float64 NumPy reference (`numpy_reference.py`) within
  per-element tolerances from the dtype policy (`numpy_reference.tolerances`),
  with attention scores requested (the general path) or not (fast paths);
- masked positions get exactly zero weight, fully masked rows are all zero,
  other rows sum to one;
- keys/values at masked key positions do not influence the output;
- each example of a batch is computed independently of the others.

Every run checks `EXPLICIT_CASES` (batch 3, T and S above 1, padded keys, a
fully masked row, scores requested in half of them) on top of the random
cases; the masked-key and batch tests draw only cases with a batch of at
least 2, T and S of at least 2 and a masked key, and the reference test
draws half of its cases that way. `--hypothesis-show-statistics` shows the
share of each kind. The number of random cases per test is set by
`tests/conftest.py` (10 by default; `KERAS_SYNTH_HYPOTHESIS_EXAMPLES=2500`
for the long search of README "Robustness").
"""

import keras
import numpy as np
import pytest
from hypothesis import event, example, given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import synthesizers as synth_lib
from tests.layers.numpy_reference import combined_mask
from tests.layers.numpy_reference import assert_within
from tests.layers.numpy_reference import reference_attention
from tests.layers.numpy_reference import tolerances
from tests.layers.stress_utils import run_layer

# Keras warns about a softmax over an axis of size 1 (one key): expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:You are using a softmax over axis")

VARIANTS = synth_lib.VARIANTS
BACKEND = keras.backend.backend()

# Mixed policies keep logits and softmax in float32; the value path and the
# output projection run in the compute dtype. Tolerances are per element,
# from the dtypes (`numpy_reference.tolerances`).
POLICIES = ["float32", "mixed_float16", "mixed_bfloat16", "float16",
            "bfloat16"]


def _compute_dtype(policy):
    return keras.DTypePolicy(policy).compute_dtype


synthesizer_strategy = st.one_of(
    st.sampled_from(VARIANTS),
    st.lists(st.sampled_from(VARIANTS), min_size=2, max_size=3,
             unique=True).map(tuple),
)


def _maybe_mask(draw, shape):
    kind = draw(st.sampled_from(["none", "random", "all_true", "all_false"]))
    if kind == "none":
        return None
    if kind == "all_true":
        return np.ones(shape, dtype=bool)
    if kind == "all_false":
        return np.zeros(shape, dtype=bool)
    return draw(hnp.arrays(np.bool_, shape))


@st.composite
def cases(draw, policies=tuple(POLICIES), nontrivial=False):
    """A layer configuration and the arguments of one call.

    With `nontrivial=True` the call has a batch of 2 or 3, query and key
    lengths of at least 2 and at least one masked key (a `value_mask` or
    `key_mask` entry False), so that comparisons across examples, keys and
    masks compare different things.
    """
    shortest = 2 if nontrivial else 1
    synthesizer = draw(synthesizer_strategy)
    max_length = draw(st.integers(shortest, 6))
    config = dict(
        num_heads=draw(st.integers(1, 3)),
        key_dim=draw(st.integers(1, 4)),
        value_dim=draw(st.one_of(st.none(), st.integers(1, 4))),
        synthesizer=synthesizer,
        max_length=max_length,
        use_bias=draw(st.booleans()),
        output_shape=draw(
            st.one_of(st.none(), st.integers(1, 4),
                      st.just((2, 3)))
        ),
        factorized_rank=draw(st.integers(1, 4)),
        dtype=draw(st.sampled_from(policies)),
    )
    if draw(st.booleans()):
        a = draw(st.integers(1, max_length))
        b = draw(st.integers(-(-max_length // a), max_length + 1))
        config["factorized_dense_sizes"] = (a, b)
    batch = draw(st.integers(shortest, 3))
    query_length = draw(st.integers(shortest, max_length))
    self_attention = draw(st.booleans())
    key_length = (query_length if self_attention
                  else draw(st.integers(shortest, max_length)))
    query_dim = draw(st.integers(1, 5))
    value_dim_in = query_dim if self_attention else draw(st.integers(1, 5))
    key_dim_in = draw(st.one_of(st.none(), st.integers(1, 5)))
    value_mask = _maybe_mask(draw, (batch, key_length))
    key_mask = _maybe_mask(draw, (batch, key_length))
    if nontrivial and _masked_keys(value_mask, key_mask).sum() == 0:
        value_mask = (np.ones((batch, key_length), bool) if value_mask is None
                      else value_mask.copy())
        value_mask[draw(st.integers(0, batch - 1)),
                   draw(st.integers(0, key_length - 1))] = False
    call = dict(
        batch=batch,
        query_shape=(batch, query_length, query_dim),
        value_shape=(batch, key_length, value_dim_in),
        key_shape=(None if key_dim_in is None
                   else (batch, key_length, key_dim_in)),
        self_attention=self_attention,
        query_mask=_maybe_mask(draw, (batch, query_length)),
        value_mask=value_mask,
        key_mask=key_mask,
        attention_mask=_maybe_mask(draw, (batch, query_length, key_length)),
        use_causal_mask=draw(st.booleans()),
        query_start_index=draw(st.integers(0, max_length - query_length)),
        seed=draw(st.integers(0, 2**31 - 1)),
        scale=draw(st.sampled_from([0.1, 1.0, 3.0])),
        # Without scores, batch-independent variants may take a path with
        # no B x H x T x S tensor: both paths are checked.
        return_scores=draw(st.booleans()),
    )
    return config, call


def _masked_keys(value_mask, key_mask):
    """`(B, S)`: True where a padding mask hides the key."""
    masks = [~m for m in (value_mask, key_mask) if m is not None]
    if not masks:
        return np.zeros((0,), bool)
    return np.logical_or.reduce(masks)


def explicit_case(synthesizer, dtype="float32", return_scores=True,
                  self_attention=False, use_causal_mask=True, seed=0):
    """A fixed non-trivial case: batch 3, T=4 and S=5 (T=S=4 in
    self-attention), padding, a fully masked query row, a custom mask."""
    B, T = 3, 4
    S = T if self_attention else 5
    value_mask = np.ones((B, S), bool)
    value_mask[0, 0] = value_mask[1, S - 2:] = False
    query_mask = np.ones((B, T), bool)
    query_mask[2, 1] = False
    attention_mask = np.ones((B, T, S), bool)
    attention_mask[1, 2, 1] = False
    config = dict(num_heads=2, key_dim=3, value_dim=2,
                  synthesizer=synthesizer, max_length=6, use_bias=True,
                  output_shape=None, factorized_rank=2, dtype=dtype)
    call = dict(batch=B, query_shape=(B, T, 3),
                value_shape=(B, S, 3), key_shape=(B, S, 4),
                self_attention=self_attention, query_mask=query_mask,
                value_mask=value_mask, key_mask=None,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
                query_start_index=1 if use_causal_mask else 0, seed=seed,
                scale=1.0, return_scores=return_scores)
    if self_attention:
        call["key_shape"] = None
    return config, call


# Cases every run checks, whatever Hypothesis draws: each property test's
# random cases come on top of these.
EXPLICIT_CASES = [
    explicit_case("random+vanilla", return_scores=True),
    explicit_case("random", return_scores=False, seed=1),
    explicit_case("factorized_random+dense", "mixed_bfloat16",
                  return_scores=True, self_attention=True, seed=2),
    explicit_case("factorized_dense+fixed_random", "mixed_float16",
                  return_scores=False, use_causal_mask=False, seed=3),
]


def with_explicit_cases(policies=tuple(POLICIES)):
    """Adds the `EXPLICIT_CASES` of these policies as `@example`s."""
    def decorate(test):
        for case in reversed(EXPLICIT_CASES):
            if case[0]["dtype"] in policies:
                test = example(case)(test)
        return test
    return decorate


# Weight scales by name (the last component of the weight's path).
_WEIGHT_STDDEV = {"logits": 2.0, "left": 1.0, "right": 1.0,
                  "mixture_logits": 1.0}


def make_case(config, call):
    """Builds the layer and the inputs of a drawn case.

    Weights are drawn with NumPy (deterministic, and no per-shape
    compilation of random ops on JAX), biases included, and mixture weights
    are random so that components are not mixed equally.
    """
    rng = np.random.default_rng(call["seed"])
    scale = call["scale"]
    query = (scale * rng.standard_normal(call["query_shape"])).astype(
        "float32")
    if call["self_attention"]:
        value = query
    else:
        value = (scale * rng.standard_normal(call["value_shape"])).astype(
            "float32")
    key = None
    if call["key_shape"] is not None:
        key = (scale * rng.standard_normal(call["key_shape"])).astype(
            "float32")
    layer = SynthesizerAttention(
        **config, kernel_initializer="zeros", random_initializer="zeros")
    layer.build(query.shape, value.shape,
                None if key is None else key.shape)
    for weight in layer.weights:
        stddev = _WEIGHT_STDDEV.get(weight.path.split("/")[-1], 0.5)
        weight.assign(
            (stddev * rng.standard_normal(tuple(weight.shape))).astype(
                "float32"))
    return layer, query, value, key


MASK_ARGS = ("query_mask", "value_mask", "key_mask", "attention_mask",
             "use_causal_mask", "query_start_index")


def _call_kwargs(call):
    return {name: call[name] for name in MASK_ARGS}


def _numpy(x):
    return keras.ops.convert_to_numpy(
        keras.ops.cast(x, "float32")).astype("float64")


def _describe(config, call):
    """Notes the case (shown on failure) and counts its kind (shown by
    `--hypothesis-show-statistics`)."""
    B, T, _ = call["query_shape"]
    S = call["value_shape"][1]
    event("batch >= 2" if B >= 2 else "batch 1")
    event("T > 1 and S > 1" if T > 1 and S > 1 else "T or S is 1")
    masked = _masked_keys(call["value_mask"], call["key_mask"]).any()
    event("a masked key" if masked else "no masked key")
    event(f"policy {config['dtype']}")
    note(f"config={config}")
    note({k: v for k, v in call.items() if not k.endswith("mask")})
    for name in ("query_mask", "value_mask", "key_mask", "attention_mask"):
        if call[name] is not None:
            note(f"{name}={call[name].astype(int).tolist()}")


@with_explicit_cases()
@given(st.one_of(cases(nontrivial=True), cases()))
def test_matches_reference_and_masks(case):
    config, call = case
    _describe(config, call)
    event("scores requested" if call["return_scores"] else "no scores")
    layer, query, value, key = make_case(config, call)
    compute_dtype = _compute_dtype(config["dtype"])

    outputs = run_layer(layer, query, value, key,
                        return_attention_scores=call["return_scores"],
                        **_call_kwargs(call))
    output = outputs[0] if call["return_scores"] else outputs
    assert keras.backend.standardize_dtype(output.dtype) == compute_dtype
    output = _numpy(output)
    expected, expected_probs = reference_attention(
        layer, query, value, key=key, **_call_kwargs(call))
    output_tol, probs_tol, row_sum_tol = tolerances(
        layer, query, value, key=key, **_call_kwargs(call))
    assert output.shape == expected.shape
    assert np.all(np.isfinite(output)), "non-finite output"
    assert_within(output, expected, output_tol, "output")
    if not call["return_scores"]:
        return

    B, T, _ = call["query_shape"]
    S = call["value_shape"][1]
    scores = _numpy(outputs[1])
    assert scores.shape == (B, config["num_heads"], T, S)
    assert np.all(np.isfinite(scores)), "non-finite attention scores"
    assert_within(scores, expected_probs, probs_tol, "attention scores")

    mask = combined_mask(B, T, S, **{
        name: call[name] for name in MASK_ARGS})
    rows = np.ones(scores.shape[:-1], bool)
    if mask is not None:
        mask = np.broadcast_to(mask[:, None], scores.shape)
        # Masked positions get exactly zero weight, synthetic logits too.
        assert np.all(scores[~mask] == 0.0)
        rows = mask.any(axis=-1)
        assert np.all(scores[~rows] == 0.0)  # fully masked rows
    assert_within(scores.sum(axis=-1)[rows], 1.0, row_sum_tol[rows],
                  "row sums")


@with_explicit_cases(policies=("float32",))
@given(cases(policies=("float32",), nontrivial=True))
def test_masked_keys_do_not_influence_output(case):
    config, call = case
    _describe(config, call)
    layer, query, value, key = make_case(config, call)
    masked_keys = np.zeros(call["value_shape"][:2], dtype=bool)
    for name in ("value_mask", "key_mask"):
        if call[name] is not None:
            masked_keys |= ~call[name]
    if call["self_attention"]:
        # The query is the value: perturbing it would change the queries.
        value = value.copy()
        call = dict(call, self_attention=False)
    output = _numpy(run_layer(layer, query, value, key, **_call_kwargs(call)))

    rng = np.random.default_rng(call["seed"] + 1)
    noise = 100.0 * rng.standard_normal(value.shape).astype("float32")
    value2 = np.where(masked_keys[..., None], noise, value)
    key2 = None
    if key is not None:
        noise = 100.0 * rng.standard_normal(key.shape).astype("float32")
        key2 = np.where(masked_keys[..., None], noise, key)
    output2 = _numpy(run_layer(layer, query, value2, key2,
                                **_call_kwargs(call)))
    np.testing.assert_allclose(output2, output, rtol=1e-5, atol=1e-5)


@with_explicit_cases(policies=("float32",))
@given(cases(policies=("float32",), nontrivial=True))
def test_examples_are_independent_of_the_batch(case):
    config, call = case
    _describe(config, call)
    layer, query, value, key = make_case(config, call)
    kwargs = _call_kwargs(call)
    output = _numpy(run_layer(layer, query, value, key, **kwargs))
    i = call["seed"] % call["batch"]
    one = slice(i, i + 1)
    single = {
        name: (arg[one] if isinstance(arg, np.ndarray) else arg)
        for name, arg in kwargs.items()
    }
    output_i = _numpy(run_layer(layer, query[one], value[one],
                                None if key is None else key[one], **single))
    np.testing.assert_allclose(output_i, output[one], rtol=1e-5, atol=1e-5)


@given(
    synthesizer=synthesizer_strategy.filter(lambda s: s != "vanilla"),
    max_length=st.integers(1, 5),
    extra=st.integers(1, 3),
    query_side=st.booleans(),
)
def test_longer_than_max_length_is_a_clear_error(
    synthesizer, max_length, extra, query_side
):
    layer = SynthesizerAttention(num_heads=2, key_dim=2,
                                 synthesizer=synthesizer,
                                 max_length=max_length,
                                 kernel_initializer="zeros",
                                 random_initializer="zeros")
    long = max_length + extra
    query = np.ones((1, long if query_side else 1, 3), "float32")
    value = np.ones((1, 1 if query_side else long, 3), "float32")
    with pytest.raises(ValueError, match=rf"max_length={max_length}") as err:
        layer(query, value)
    assert str(long) in str(err.value)


@pytest.mark.parametrize("synthesizer", ["vanilla", "dense", "random",
                                         "factorized_dense+vanilla"])
def test_per_head_size_one_with_as_many_positions_as_heads(synthesizer):
    # Regression (found by Hypothesis): on TensorFlow `keras.ops.add(x, bias)`
    # becomes `tf.nn.bias_add` along axis 1 when the bias squeezes to one
    # dimension equal to x.shape[1]: the (H, 1) bias of a projection with
    # key_dim or value_dim 1 was added along the sequence axis when T == H.
    config = dict(num_heads=2, key_dim=1, value_dim=1,
                  synthesizer=synthesizer, max_length=2, use_bias=True,
                  output_shape=None, factorized_rank=1, dtype="float32")
    call = dict(batch=1, query_shape=(1, 2, 1), value_shape=(1, 2, 1),
                return_scores=False,
                key_shape=None, self_attention=False, query_mask=None,
                value_mask=None, key_mask=None, attention_mask=None,
                use_causal_mask=False, query_start_index=0, seed=0,
                scale=1.0)
    layer, query, value, key = make_case(config, call)
    output = _numpy(layer(query, value))
    expected, _ = reference_attention(layer, query, value)
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)
