"""Property-based tests of `SynthesizerAttention` (Hypothesis).

Hypothesis draws the layer (variant or mixture, heads, key/value dims,
`max_length`, ranks, biases, output shape, dtype policy) and the call (batch
size, query and key lengths from 1 to `max_length`, self- or
cross-attention, separate keys, padding masks, a custom `attention_mask`,
causal masking with a query offset, rows fully masked in about one case
in ten, batch-independent logits lifted on one key by a spread of 10-80 in
half the cases) and checks:

- outputs and attention probabilities are finite;
- they equal the float64 NumPy reference (`numpy_reference.py`) within
  per-element tolerances from the dtype policy (`numpy_reference.tolerances`),
  with attention scores requested (the general path) or not (fast paths);
- masked positions get exactly zero weight, fully masked rows are all zero,
  other rows sum to one;
- keys/values at masked key positions do not influence the output;
- each example of a batch is computed independently of the others.

Every run checks `EXPLICIT_CASES` (batch 3, T and S above 1, padded keys, a
fully masked row, scores requested in half of them; two under
mixed_float16 with a spread on the batch-shared path) on top of the random
cases; the masked-key and batch tests draw only cases with a batch of at
least 2, T and S of at least 2 and a masked key that some query row would
otherwise see (the lifted key, where there is a spread), and the reference
test draws half of its cases that way. `--hypothesis-show-statistics` shows the
share of each kind. The number of random cases per test is set by
`tests/conftest.py` (10 by default; `KERAS_SYNTH_HYPOTHESIS_EXAMPLES=2500`
for the long search of docs/robustness.md).
"""

import keras
import numpy as np
import pytest
from hypothesis import event, example, given, note, settings
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
# Random logits and factors all zero (options of the variants not in use
# are ignored).
ZERO_RANDOM_LOGITS = {name: {"initializer": "zeros"} for name in
                      ("random", "fixed_random", "factorized_random")}
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
    """No mask, an all-true one or a random one (each entry True with
    probability 5/6, drawn one by one: no fill value). A whole mask False
    is drawn once per case, not here (`cases`): per mask, one in four of
    each of four masks made about two thirds of the cases mask every row,
    where the output is the bias whatever the layer does."""
    kind = draw(st.sampled_from(["none", "random", "random", "all_true"]))
    if kind == "none":
        return None
    if kind == "all_true":
        return np.ones(shape, dtype=bool)
    return draw(hnp.arrays(
        np.bool_, shape, elements=st.sampled_from([True] * 5 + [False]),
        fill=st.nothing()))


PADDING_ARGS = ("query_mask", "value_mask", "key_mask", "attention_mask")

# Spreads of the batch-independent logits (`make_case`): 0 (none) or
# 10-80, the range where an example's visible keys sit far below the
# batch's row maximum (float16's range ends at a spread of ~17; the
# batch-shared path falls back to one example at a time past 80).
spread_strategy = st.one_of(st.just(0.0), st.floats(10.0, 80.0))


def visible_keys(batch, query_length, key_length, query_mask=None,
                 attention_mask=None, use_causal_mask=False,
                 query_start_index=0):
    """`(B, S)`: whether some query row of the example may attend to the
    key under every mask but the key padding masks, i.e. whether masking
    the key changes anything."""
    mask = combined_mask(batch, query_length, key_length,
                         query_mask=query_mask,
                         attention_mask=attention_mask,
                         use_causal_mask=use_causal_mask,
                         query_start_index=query_start_index)
    if mask is None:
        return np.ones((batch, key_length), bool)
    return mask.any(axis=1)


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
        synthesizer_options={
            "factorized_random": {"rank": draw(st.integers(1, 4))}},
        dtype=draw(st.sampled_from(policies)),
    )
    if draw(st.booleans()):
        a = draw(st.integers(1, max_length))
        b = draw(st.integers(-(-max_length // a), max_length + 1))
        config["synthesizer_options"]["factorized_dense"] = {"sizes": (a, b)}
    batch = draw(st.integers(shortest, 3))
    query_length = draw(st.integers(shortest, max_length))
    self_attention = draw(st.booleans())
    key_length = (query_length if self_attention
                  else draw(st.integers(shortest, max_length)))
    query_dim = draw(st.integers(1, 5))
    value_dim_in = query_dim if self_attention else draw(st.integers(1, 5))
    key_dim_in = draw(st.one_of(st.none(), st.integers(1, 5)))
    masks = {
        "query_mask": _maybe_mask(draw, (batch, query_length)),
        "value_mask": _maybe_mask(draw, (batch, key_length)),
        "key_mask": _maybe_mask(draw, (batch, key_length)),
        # Per example `(B, T, S)`, or the shapes that keep the batch-shared
        # path of batch-independent variants: key padding `(B, 1, S)`, one
        # pattern `(1, T, S)`.
        "attention_mask": _maybe_mask(draw, draw(st.sampled_from([
            (batch, query_length, key_length), (batch, 1, key_length),
            (1, query_length, key_length)]))),
    }
    # One case in ten has a whole mask False (every row masked); never a
    # non-trivial one.
    empty = draw(st.sampled_from((None,) * 36 + PADDING_ARGS))
    if empty is not None and not nontrivial:
        masks[empty] = np.zeros(
            {"query_mask": (batch, query_length),
             "attention_mask": (batch, query_length, key_length)}.get(
                 empty, (batch, key_length)), bool)
    use_causal_mask = draw(st.booleans())
    query_start_index = draw(st.integers(0, max_length - query_length))
    visible = visible_keys(batch, query_length, key_length,
                           masks["query_mask"], masks["attention_mask"],
                           use_causal_mask, query_start_index)
    effective = visible & _masked_keys(masks["value_mask"],
                                       masks["key_mask"], (batch,
                                                           key_length))
    if nontrivial and not effective.any():
        # Mask a key that some query row would otherwise see (not one
        # that the causal or attention mask hides already).
        if not visible.any():
            masks["query_mask"] = masks["attention_mask"] = None
            visible = visible_keys(batch, query_length, key_length,
                                   use_causal_mask=use_causal_mask,
                                   query_start_index=query_start_index)
        candidates = np.argwhere(visible)
        b, k = candidates[draw(st.integers(0, len(candidates) - 1))]
        value_mask = masks["value_mask"]
        value_mask = (np.ones((batch, key_length), bool) if value_mask is None
                      else value_mask.copy())
        value_mask[b, k] = False
        masks["value_mask"] = value_mask
        effective = np.zeros_like(visible)
        effective[b, k] = True
    # The spread lifts one key above the others in every row; a key some
    # example masks (where there is one), so that this example's visible
    # keys sit `spread` below the batch's maximum.
    masked = np.argwhere(effective)
    if len(masked):
        spread_key = int(masked[draw(st.integers(0, len(masked) - 1))][1])
    else:
        spread_key = draw(st.integers(0, key_length - 1))
    call = dict(
        batch=batch,
        query_shape=(batch, query_length, query_dim),
        value_shape=(batch, key_length, value_dim_in),
        key_shape=(None if key_dim_in is None
                   else (batch, key_length, key_dim_in)),
        self_attention=self_attention,
        use_causal_mask=use_causal_mask,
        query_start_index=query_start_index,
        seed=draw(st.integers(0, 2**31 - 1)),
        scale=draw(st.sampled_from([0.1, 1.0, 3.0])),
        # Without scores, batch-independent variants may take a path with
        # no B x H x T x S tensor: both paths are checked.
        return_scores=draw(st.booleans()),
        spread=draw(spread_strategy),
        spread_key=spread_key,
        **masks,
    )
    return config, call


def _masked_keys(value_mask, key_mask, shape=(0,)):
    """`(B, S)`: True where a padding mask hides the key (`shape` of
    False without a padding mask)."""
    masks = [~m for m in (value_mask, key_mask) if m is not None]
    if not masks:
        return np.zeros(shape, bool)
    return np.logical_or.reduce(masks)


def explicit_case(synthesizer, dtype="float32", return_scores=True,
                  self_attention=False, use_causal_mask=True, seed=0,
                  spread=0.0, attention_mask=True):
    """A fixed non-trivial case: batch 3, T=4 and S=5 (T=S=4 in
    self-attention), padding, a fully masked query row, a custom mask
    (`(B, T, S)`; none without `attention_mask`); with `spread`, key 0
    (which example 0 masks) lifted by it."""
    B, T = 3, 4
    S = T if self_attention else 5
    value_mask = np.ones((B, S), bool)
    value_mask[0, 0] = value_mask[1, S - 2:] = False
    query_mask = np.ones((B, T), bool)
    query_mask[2, 1] = False
    custom_mask = None
    if attention_mask:
        custom_mask = np.ones((B, T, S), bool)
        custom_mask[1, 2, 1] = False
    config = dict(num_heads=2, key_dim=3, value_dim=2,
                  synthesizer=synthesizer, max_length=6, use_bias=True,
                  output_shape=None, dtype=dtype,
                  synthesizer_options={"factorized_random": {"rank": 2}})
    call = dict(batch=B, query_shape=(B, T, 3),
                value_shape=(B, S, 3), key_shape=(B, S, 4),
                self_attention=self_attention, query_mask=query_mask,
                value_mask=value_mask, key_mask=None,
                attention_mask=custom_mask,
                use_causal_mask=use_causal_mask,
                query_start_index=1 if use_causal_mask else 0, seed=seed,
                scale=1.0, return_scores=return_scores, spread=spread,
                spread_key=0)
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
    # The batch-shared key-padded path (no per-example attention mask, no
    # scores) under float16 with example 0's keys 30 or 60 below the row
    # maximum (it was NaN).
    explicit_case("random", "mixed_float16", return_scores=False, seed=4,
                  spread=30.0, attention_mask=False),
    explicit_case("factorized_random", "mixed_float16", return_scores=False,
                  seed=5, spread=60.0, attention_mask=False),
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
    options = {name: dict(config.get("synthesizer_options", {}).get(name, {}),
                          initializer="zeros")
               for name in ("random", "fixed_random", "factorized_random")}
    options.update({key: value for key, value in
                    config.get("synthesizer_options", {}).items()
                    if key not in options})
    layer = SynthesizerAttention(
        **dict(config, synthesizer_options=options),
        kernel_initializer="zeros")
    layer.build(query.shape, value.shape,
                None if key is None else key.shape)
    for weight in layer.weights:
        stddev = _WEIGHT_STDDEV.get(weight.path.split("/")[-1], 0.5)
        weight.assign(
            (stddev * rng.standard_normal(tuple(weight.shape))).astype(
                "float32"))
    if call.get("spread"):
        add_spread(layer, call["spread"], call["spread_key"])
    return layer, query, value, key


def add_spread(layer, spread, key):
    """Lifts the batch-independent logits of `key` by `spread` in every row
    and head (in the mixed logits: each such component carries its share,
    divided by its mixture weight). Random and fixed random: the column of
    their logits; factorized random: its first rank term becomes
    `1 * spread e_key^T`."""
    weights = layer.mixture_weights()
    alpha = (np.ones((layer.num_heads, 1)) if weights is None
             else keras.ops.convert_to_numpy(weights).astype("float64"))
    shared = [(i, s) for i, s in enumerate(layer.synthesizers)
              if not s.batch_dependent]
    for i, synthesizer in shared:
        boost = spread / alpha[:, i] / len(shared)  # (H,)
        if synthesizer.variant in ("random", "fixed_random"):
            logits = keras.ops.convert_to_numpy(synthesizer.kernel.value)
            logits = logits.astype("float64")
            logits[:, :, key] += boost[:, None]
            synthesizer.kernel.assign(logits.astype("float32"))
        else:
            left = keras.ops.convert_to_numpy(synthesizer.left.value)
            right = keras.ops.convert_to_numpy(synthesizer.right.value)
            left[..., 0] = 1.0
            right[..., 0] = 0.0
            right[:, key, 0] = boost
            synthesizer.left.assign(left.astype("float32"))
            synthesizer.right.assign(right.astype("float32"))


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
    event("spread 10-80" if call.get("spread") else "no spread")
    mask = combined_mask(B, T, S, **_call_kwargs(call))
    event("every row masked" if mask is not None and not mask.any()
          else "some row attends")
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
        name: (arg[one] if isinstance(arg, np.ndarray) and len(arg) > 1
               else arg)
        for name, arg in kwargs.items()
    }
    output_i = _numpy(run_layer(layer, query[one], value[one],
                                None if key is None else key[one], **single))
    np.testing.assert_allclose(output_i, output[one], rtol=1e-5, atol=1e-5)


def _draw_cases(strategy, count=200):
    """`count` cases drawn by `strategy` (derandomized: the same each run)."""
    drawn = []

    @settings(max_examples=count, derandomize=True, database=None)
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect()
    return drawn


def _all_rows_masked(call):
    B, T, _ = call["query_shape"]
    S = call["value_shape"][1]
    mask = combined_mask(B, T, S, **_call_kwargs(call))
    return mask is not None and not mask.any()


def test_drawn_cases_exercise_the_layer():
    """The strategy itself: most cases leave some query row a key (a case
    with every row masked only checks that the output is the bias), some
    mask every row, many have spread logits, and every non-trivial case
    masks a key that some query row would otherwise see."""
    drawn = _draw_cases(cases())
    masked = np.mean([_all_rows_masked(call) for _, call in drawn])
    assert 0.0 < masked <= 0.25, masked
    spread = np.mean([bool(call["spread"]) for _, call in drawn])
    assert 0.2 <= spread <= 0.8, spread
    for config, call in _draw_cases(cases(nontrivial=True)):
        B, T, _ = call["query_shape"]
        S = call["value_shape"][1]
        visible = visible_keys(
            B, T, S, call["query_mask"], call["attention_mask"],
            call["use_causal_mask"], call["query_start_index"])
        hidden = _masked_keys(call["value_mask"], call["key_mask"], (B, S))
        assert (visible & hidden).any(), (config, call)
        # The lifted key is one that some example masks.
        assert hidden[:, call["spread_key"]].any(), (config, call)


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
                                 synthesizer_options=ZERO_RANDOM_LOGITS)
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
                  output_shape=None, dtype="float32",
                  synthesizer_options={"factorized_random": {"rank": 1}})
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


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
def test_row_sum_tolerance_rejects_empty_rows(policy):
    """Large dense logits under bfloat16: their rounding error bound `e`
    exceeds 1/4, so the probabilities' relative tolerance `4 (eps + e)`
    exceeds 1. The row sums do not depend on the logits' error (a softmax
    sums to 1 whatever its logits): their tolerance stays a few epsilons,
    and a row of zeros is rejected."""
    config = dict(num_heads=2, key_dim=4, value_dim=None,
                  synthesizer="dense", max_length=5, use_bias=True,
                  output_shape=None, dtype=policy,
                  synthesizer_options={"factorized_random": {"rank": 1}})
    call = dict(batch=2, query_shape=(2, 4, 5), value_shape=(2, 5, 5),
                key_shape=None, self_attention=False, query_mask=None,
                value_mask=None, key_mask=None, attention_mask=None,
                use_causal_mask=False, query_start_index=0, seed=7,
                scale=30.0, return_scores=True, spread=0.0, spread_key=0)
    layer, query, value, key = make_case(config, call)
    _, probs_tol, row_sum_tol = tolerances(layer, query, value)
    _, probs = reference_attention(layer, query, value)
    # The precondition: the probabilities' tolerance accepts zeros.
    assert np.all(probs_tol >= probs), "the logits' error is not large"
    assert np.all(row_sum_tol < 0.05), row_sum_tol.max()
    with pytest.raises(AssertionError, match="row sums"):
        assert_within(np.zeros(row_sum_tol.shape), 1.0, row_sum_tol,
                      "row sums")
    scores = _numpy(run_layer(layer, query, value,
                              return_attention_scores=True)[1])
    assert_within(scores.sum(axis=-1), 1.0, row_sum_tol, "row sums")
