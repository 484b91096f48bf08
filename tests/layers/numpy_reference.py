"""A float64 NumPy reference of `SynthesizerAttention` (the paper's equations).

It reads the layer's own weights, by the names the layer's docstring gives
(`value/kernel`, `dense/hidden/kernel`, `random/logits`, `mixture_logits`,
...), and recomputes the layer's forward pass (inference mode: no dropout)
from the paper's equations, independently of the layer's code:

- values `V = M W_V + b_V`, output `Y = concat_h(P_h V_h) W_O + b_O`;
- the logits of every variant (docs/layer.md, "The variants") and of mixtures,
  `sum_i softmax(w_h)_i L_i`; the convolutions' logits are `-inf` outside
  their window of `kernel_size` keys;
- masks combined as in `keras.layers.MultiHeadAttention` (True = may
  attend) and applied to the final logits; a query row whose keys are all
  masked gets all-zero probabilities.

API (kept stable, other tests use it):

    output, probs = reference_attention(
        layer, query, value, key=None, query_mask=None, value_mask=None,
        key_mask=None, attention_mask=None, use_causal_mask=False,
        query_start_index=0)

`output` is `(B, T, *output_shape)`, `probs` is `(B, H, T, S)`, both float64
NumPy arrays. `layer_weights(layer)` returns the weights as a dict of
float64 arrays keyed by those names.

Tolerances (`tolerances`, `assert_within`): per element, from the layer's
dtype policy. With `eps` the machine epsilon of the compute dtype (2**-23
float32, 2**-10 float16, 2**-7 bfloat16), `e` the largest rounding error of
a logit of the query row (`eps` of the dtype that variant's logits are
computed in, times the magnitude of their terms: see `_logit_errors`; an
error `e` in the logits changes a probability by up to `2 e` relative) and
`c = TOLERANCE_FACTOR`:

    |p - p_ref| <= c (eps + e) p_ref + c tiny
    |y - y_ref| <= c (eps + e) m + c tiny m_1

where `m = |P| (|M| |W_V| + |b_V|) |W_O| + |b_O|` is the magnitude of the
terms summed into that output element (>= |y_ref|; a sum of products in a
dtype is exact to a few `eps` of it), `tiny` the absolute rounding error of
a probability far below 1 (the larger of float32's smallest normal number
and `eps` times the compute dtype's: 2**-24 in float16), `m_1` is `m` with
every probability 1. Both are relative to each element's own size, not to
the largest value of the tensor.

A probability row's sum is within `c (eps + S eps_l) + c tiny S` of 1,
`eps_l` the machine epsilon of the logits dtype in which the softmax runs:
the softmax of any logits sums to 1, so the logits' error `e` has no part
in it (with it, a bfloat16 row of large logits, `e` near 1/4, accepted a
sum of 0).

The logits of random, fixed random and factorized random are weights in the
layer's logits dtype (float32 under every 16-bit policy, mixed or not), so
their `e` is float32's `eps` times their magnitude there.
"""

import math

import numpy as np
from keras import ops

__all__ = [
    "layer_weights",
    "reference_attention",
    "reference_logits",
    "combined_mask",
    "masked_softmax",
    "tolerances",
    "assert_within",
]

# `c` of the tolerances: on random cases of the property tests the errors
# stay within about one `(eps + e)`; 4 leaves a margin without being loose.
TOLERANCE_FACTOR = 4.0


def _to_numpy(x):
    if x is None:
        return None
    if hasattr(x, "value") and not isinstance(x, np.ndarray):
        x = x.value  # a keras.Variable
    return np.asarray(ops.convert_to_numpy(x))


def _f64(x):
    return None if x is None else _to_numpy(x).astype(np.float64)


def _bool(x):
    return None if x is None else _to_numpy(x).astype(bool)


def layer_weights(layer):
    """The layer's weights as `{name: float64 array}`.

    Names are the weights' paths relative to the layer, e.g.
    `"dense/hidden/kernel"`, `"random/logits"`, `"mixture_logits"`.
    """
    if not layer.built:
        raise ValueError("Build (call) the layer before reading its weights.")
    # Every layer has `value/...` and `attention_output/...` weights, so the
    # path components all weights share are exactly the layer's own scope.
    parts = [w.path.split("/") for w in layer.weights]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common]
              for p in parts):
        common += 1
    weights = {}
    for w, p in zip(layer.weights, parts):
        weights["/".join(p[common:])] = _f64(w)
    return weights


def _project(x, weights, name):
    """`EinsumDense("btd,dnk->btnk")` with optional bias `(n, k)`."""
    y = np.einsum("btd,dnk->btnk", x, weights[name + "/kernel"])
    bias = weights.get(name + "/bias")
    if bias is not None:
        y = y + bias
    return y


def _relu(x):
    return np.maximum(x, 0.0)


# Float64 logits of variants defined outside the package (tests of
# user-defined synthesizers add theirs): name -> f(layer, weights, query,
# key, start, T, S) returning `(B, H, T, S)` or `(H, T, S)`.
EXTRA_VARIANT_LOGITS = {}


def _variant_logits(layer, name, weights, query, key, start, T, S):
    """Logits `(B, H, T, S)` of one variant (broadcast over the batch)."""
    B = query.shape[0]
    H = layer.num_heads
    if name in EXTRA_VARIANT_LOGITS:
        L = EXTRA_VARIANT_LOGITS[name](layer, weights, query, key, start, T, S)
        return np.broadcast_to(L, (B, H, T, S))
    if name == "vanilla":
        q = _project(query, weights, "vanilla/query")
        k = _project(key, weights, "vanilla/key")
        return np.einsum("btnk,bsnk->bnts", q, k) / math.sqrt(layer.key_dim)
    if name == "dense":
        hidden = _relu(_project(query, weights, "dense/hidden"))
        w2 = weights["dense/kernel"]  # (H, k, l)
        rows = np.einsum("btnk,nkl->bntl", hidden, w2)
        if "dense/bias" in weights:
            rows = rows + weights["dense/bias"][None, :, None, :]
        return rows[..., :S]
    if name == "factorized_dense":
        hidden = _relu(_project(query, weights, "factorized_dense/hidden"))
        factors = []
        for part in ("a", "b"):
            f = np.einsum(
                "btnk,nka->bnta",
                hidden,
                weights[f"factorized_dense/kernel_{part}"],
            )
            bias = weights.get(f"factorized_dense/bias_{part}")
            if bias is not None:
                f = f + bias[None, :, None, :]
            factors.append(f)
        b1, b2 = factors
        a, b = b1.shape[-1], b2.shape[-1]
        j = np.arange(a * b)
        rows = b1[..., j // b] * b2[..., j % b]  # row[j] = b1[j//b] b2[j%b]
        return rows[..., :S]
    if name in ("random", "fixed_random"):
        R = weights[f"{name}/logits"]  # (H, l, l)
        L = R[:, start:start + T, :S]
        return np.broadcast_to(L[None], (B, H, T, S))
    if name == "factorized_random":
        R1 = weights["factorized_random/left"][:, start:start + T]
        R2 = weights["factorized_random/right"][:, :S]
        L = np.einsum("ntr,nsr->nts", R1, R2)
        return np.broadcast_to(L[None], (B, H, T, S))
    if name in ("light_conv", "dynamic_conv"):
        return np.broadcast_to(_convolution_logits(
            layer, name, weights, query, start, T, S), (B, H, T, S))
    raise ValueError(f"Unknown variant {name!r}")


def _convolution_logits(layer, name, weights, query, start, T, S):
    """`L_h[t, s] = kernel_h[s - t + before]` in the window of `t`, `-inf`
    outside: `light_conv`'s kernel is a weight `(H, K)`, `dynamic_conv`'s
    is predicted from `x_t`, `W_h x_t + b_h`."""
    options = layer.synthesizer_options[name]
    size = options["kernel_size"]
    before = size - 1 if options["padding"] == "causal" else (size - 1) // 2
    tap = np.arange(S)[None, :] - (np.arange(T)[:, None] + start) + before
    inside = (tap >= 0) & (tap < size)
    tap = np.clip(tap, 0, size - 1)
    if name == "light_conv":
        kernel = weights["light_conv/kernel"]  # (H, K)
        logits = kernel[:, tap][None]  # (1, H, T, S)
    else:
        kernel = _project(query, weights, "dynamic_conv/projection")
        # (B, T, H, K) -> (B, H, T, S): row t takes its own kernel's taps.
        logits = np.take_along_axis(
            kernel.transpose(0, 2, 1, 3), np.broadcast_to(
                tap, kernel.shape[:1] + kernel.shape[2:3] + tap.shape),
            axis=-1)
    return np.where(inside, logits, -np.inf)


def reference_logits(layer, query, value=None, key=None, query_start_index=0,
                     weights=None):
    """The (mixed) logits `(B, H, T, S)` in float64, before masking."""
    query = _f64(query)
    value = query if value is None else _f64(value)
    key = value if key is None else _f64(key)
    weights = layer_weights(layer) if weights is None else weights
    T, S = query.shape[1], value.shape[1]
    logits = [
        _variant_logits(layer, name, weights, query, key,
                        int(query_start_index), T, S)
        for name in layer.variants
    ]
    if len(logits) == 1:
        return np.array(logits[0])
    w = weights["mixture_logits"]  # (H, N)
    w = np.exp(w - w.max(axis=-1, keepdims=True))
    alpha = w / w.sum(axis=-1, keepdims=True)
    return sum(
        alpha[None, :, i, None, None] * L for i, L in enumerate(logits)
    )


def combined_mask(B, T, S, query_mask=None, value_mask=None, key_mask=None,
                  attention_mask=None, use_causal_mask=False,
                  query_start_index=0):
    """The `(B, T, S)` boolean mask MultiHeadAttention would use, or None."""
    mask = None

    def _and(m, new):
        return new if m is None else np.logical_and(m, new)

    if query_mask is not None:
        mask = _and(mask, _bool(query_mask)[:, :, None])
    if value_mask is not None:
        mask = _and(mask, _bool(value_mask)[:, None, :])
    if key_mask is not None:
        mask = _and(mask, _bool(key_mask)[:, None, :])
    if use_causal_mask:
        rows = np.arange(T)[:, None] + int(query_start_index)
        mask = _and(mask, (rows >= np.arange(S)[None, :])[None])
    if attention_mask is not None:
        mask = _and(mask, _bool(attention_mask))
    if mask is None:
        return None
    return np.broadcast_to(mask, (B, T, S))


def masked_softmax(logits, mask=None):
    """Softmax over the last axis; masked entries get exactly 0 and a fully
    masked row is all zeros. `mask` broadcasts to `logits`."""
    logits = np.asarray(logits, dtype=np.float64)
    if mask is None:
        mask = np.ones(logits.shape, dtype=bool)
    mask = np.broadcast_to(mask, logits.shape)
    masked = np.where(mask, logits, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(mask, np.exp(masked - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)


def _reference_probs(layer, query, value, key, query_mask, value_mask,
                     key_mask, attention_mask, use_causal_mask,
                     query_start_index):
    """The float64 inputs, the layer's weights, the logits, the merged
    mask `(B, T, S)` (or `None`) and the probabilities `(B, H, T, S)`."""
    query = _f64(query)
    value = _f64(value)
    key = value if key is None else _f64(key)
    weights = layer_weights(layer)
    B, T, S = query.shape[0], query.shape[1], value.shape[1]
    logits = reference_logits(layer, query, value, key, query_start_index,
                              weights=weights)
    mask = combined_mask(B, T, S, query_mask, value_mask, key_mask,
                         attention_mask, use_causal_mask, query_start_index)
    probs = masked_softmax(logits, None if mask is None else mask[:, None])
    return query, value, key, weights, logits, mask, probs


def reference_attention(layer, query, value, key=None, query_mask=None,
                        value_mask=None, key_mask=None, attention_mask=None,
                        use_causal_mask=False, query_start_index=0):
    """Recomputes `layer(query, value, key, ...)` in float64 NumPy.

    Returns:
        `(output, probs)`: output `(B, T, *output_shape)`, attention
        probabilities `(B, H, T, S)`.
    """
    query, value, key, weights, logits, mask, probs = _reference_probs(
        layer, query, value, key, query_mask, value_mask, key_mask,
        attention_mask, use_causal_mask, query_start_index)
    values = _project(value, weights, "value")  # (B, S, H, kv)
    heads = np.einsum("bnts,bsnh->btnh", probs, values)
    w_out = weights["attention_output/kernel"]  # (H, kv, *out)
    output = np.tensordot(heads, w_out, axes=([2, 3], [0, 1]))
    if "attention_output/bias" in weights:
        output = output + weights["attention_output/bias"]
    return output, probs


def machine_epsilon(dtype):
    """`eps` of a floating dtype name (bfloat16 included: 2**-7)."""
    if dtype == "bfloat16":
        return 2.0 ** -7
    return float(np.finfo(dtype).eps)


def tolerances(layer, query, value, key=None, query_mask=None,
               value_mask=None, key_mask=None, attention_mask=None,
               use_causal_mask=False, query_start_index=0):
    """Per-element tolerances of `layer(query, value, key, ...)`.

    Returns:
        `(output_tol, probs_tol, row_sum_tol)`, shaped like the output
        `(B, T, *output_shape)`, the probabilities `(B, H, T, S)` and their
        row sums `(B, H, T)` (see the module docstring).
    """
    policy = layer.dtype_policy
    eps = machine_epsilon(policy.compute_dtype)
    query, value, key, weights, logits, mask, probs = _reference_probs(
        layer, query, value, key, query_mask, value_mask, key_mask,
        attention_mask, use_causal_mask, query_start_index)
    T, S = logits.shape[-2], logits.shape[-1]
    kept = (np.ones(logits.shape, bool) if mask is None
            else np.broadcast_to(mask[:, None], logits.shape))
    # (B, H, T): the largest rounding error of a kept logit of the row.
    error = np.where(kept, _logit_errors(layer, weights, query, key,
                                         int(query_start_index), T, S),
                     0.0).max(axis=-1)
    relative = TOLERANCE_FACTOR * (eps + error)
    # Probabilities far below 1 (past the compute dtype's normal range, or
    # float32's while the softmax runs) are rounded in absolute terms.
    tiny = TOLERANCE_FACTOR * max(
        float(np.finfo(np.float32).tiny),
        machine_epsilon(policy.compute_dtype)
        * _smallest_normal(policy.compute_dtype))
    probs_tol = relative[..., None] * probs + tiny
    magnitudes = {name: np.abs(w) for name, w in weights.items()}
    values = _project(np.abs(value), magnitudes, "value")
    w_out = magnitudes["attention_output/kernel"]
    terms = np.tensordot(np.einsum("bnts,bsnh->btnh", probs, values), w_out,
                         axes=([2, 3], [0, 1]))
    if "attention_output/bias" in magnitudes:
        terms = terms + magnitudes["attention_output/bias"]
    # Each probability's absolute part `tiny` reaches the output through its
    # value and the output projection.
    all_values = np.tensordot(values.sum(axis=1)[:, None], w_out,
                              axes=([2, 3], [0, 1]))
    row_relative = relative.max(axis=1)  # (B, T): the worst head
    row_relative = row_relative.reshape(
        row_relative.shape + (1,) * (terms.ndim - 2))
    # The softmax in the logits dtype (its sum rounded up to `S` times),
    # then each probability rounded to the compute dtype: no logit error.
    softmax_eps = machine_epsilon(logits_dtype(policy))
    row_sum_tol = np.full(
        relative.shape,
        TOLERANCE_FACTOR * (eps + S * softmax_eps) + tiny * S)
    return row_relative * terms + tiny * all_values, probs_tol, row_sum_tol


# Variants whose logits come from projections of the query (and key) in the
# compute dtype; the others' logits are weights in the variable dtype.
_PROJECTED = ("vanilla", "dense", "factorized_dense")


def _logit_errors(layer, weights, query, key, start, T, S):
    """`(B, H, T, S)`: a bound on the rounding error of each logit.

    Each variant's logits rounded to `eps` of the dtype they are computed
    in, relative to the magnitude of their terms: the logits recomputed from
    |inputs| and |weights| (|q||k| for dot products, not |q.k|, which may
    cancel), weighted by the mixture's weights.
    """
    policy = layer.dtype_policy
    magnitudes = {name: (w if name == "mixture_logits" else np.abs(w))
                  for name, w in weights.items()}
    if len(layer.variants) == 1:
        alpha = np.ones((layer.num_heads, 1))
    else:
        w = weights["mixture_logits"]
        w = np.exp(w - w.max(axis=-1, keepdims=True))
        alpha = w / w.sum(axis=-1, keepdims=True)
    errors = 0.0
    for i, name in enumerate(layer.variants):
        eps = machine_epsilon(policy.compute_dtype if name in _PROJECTED
                              else logits_dtype(policy))
        size = _variant_logits(layer, name, magnitudes, np.abs(query),
                               np.abs(key), start, T, S)
        size = np.where(np.isfinite(size), size, 0.0)  # (-inf: masked)
        errors = errors + alpha[None, :, i, None, None] * eps * size
    return errors


def logits_dtype(policy):
    """The dtype of the layer's logits and logit weights under `policy`:
    float32 for a 16-bit compute dtype (mixed or not), else the compute
    dtype (`SynthesizerAttention`'s docstring)."""
    if policy.compute_dtype in ("float16", "bfloat16"):
        return "float32"
    return policy.compute_dtype


def _smallest_normal(dtype):
    if dtype == "bfloat16":
        return float(np.finfo(np.float32).tiny)
    return float(np.finfo(dtype).tiny)


def assert_within(actual, expected, tol, what):
    """Asserts `|actual - expected| <= tol` element by element (`expected`
    and `tol` broadcast to `actual`'s shape)."""
    actual = np.asarray(actual, np.float64)
    expected = np.broadcast_to(np.asarray(expected, np.float64),
                               actual.shape)
    error = np.abs(actual - expected)
    bad = ~(error <= tol)
    if np.any(bad):
        i = np.unravel_index(np.argmax(np.where(bad, error - tol, -np.inf)),
                             error.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {error.size} elements outside "
            f"the tolerance; worst at {list(i)}: actual {actual[i]!r}, "
            f"expected {expected[i]!r}, error {error[i]:.3g} > tolerance "
            f"{np.broadcast_to(tol, error.shape)[i]:.3g}")
