"""The batch-shared attention path: `H x T x S` probabilities for all examples.

Random, fixed random and factorized random logits (and mixtures of them)
do not depend on the input, so one `(H, T, S)` tensor of probabilities
serves the whole batch and no `B x H x T x S` tensor is ever built. The
masks stay factored (`attention_masks.factor_masks`): query rows `(B, T)`,
key padding `(B, S)`, a batch-independent pattern `(T, S)` (causal,
sliding window, a `(T, S)` attention mask).

Key padding differs per example, so the softmax is normalised after the
product with the values: `y = (E @ (m * V)) / (E @ m)`, `E = exp(L - c)`,
`c` the row maximum over the keys any example may attend to. That is exact
while no allowed logit of a row lies more than 80 below its maximum (else
an example's keys could underflow in `E`); otherwise an exact fallback runs
one example at a time, rematerialised (`keras.remat`), so that no
`B x H x T x S` tensor exists, not for the gradient either.

Mixed precision: `E` is unnormalised, so its entries reach `exp(-80)`
(about `1.8e-35`, a normal float32 number). Both products, `E @ (m * V)`
and `E @ m`, therefore run in float32 (`WORK_DTYPE`: the values are upcast,
the `(B, T, H, value_dim)` quotient is cast back to the compute dtype).
Cast to float16, whose smallest subnormal is about `6e-8` (`exp(-16.6)`),
`E` would lose every key more than ~17 below the row maximum, and an
example that attends only to such keys would divide `0 / 0` (NaN). The
alternative, a float16 threshold of ~16 on the spread, would send ordinary
trained random logits to the one-example-at-a-time fallback and still be
inexact near it (float16 subnormals keep a few bits only). The float32
products are exact for every compute dtype and cost what the float16 ones
do in memory terms: the values and the output in float32,
`B x S x H x value_dim` and `B x T x H x value_dim`, never a
`B x H x T x S` tensor. Normalised probabilities (the other paths) are cast
to the compute dtype as usual: a probability below float16's range is
below its rounding error relative to the row's sum of 1.
"""

import keras
from keras import ops

from keras_synth.layers.attention.masks import LOWEST
from keras_synth.layers.attention.masks import masked_softmax
from keras_synth.layers.attention.masks import zero_rows
from keras_synth.layers.keras_utils import branch

# A row whose allowed logits span less than this normalises after the
# product with the values; exp(-80) is still a normal float32.
SAFE_SPREAD = 80.0

# The dtype of the unnormalised weights and of their products with the
# values and the key mask (see the module docstring): float32, or float64
# for float64 logits.
WORK_DTYPE = "float32"


def work_dtype(dtype):
    """The dtype `key_padded_attention` computes in for logits of `dtype`:
    float64 stays float64, anything else (float16, bfloat16, float32)
    becomes `WORK_DTYPE`."""
    dtype = keras.backend.standardize_dtype(dtype)
    return "float64" if dtype == "float64" else WORK_DTYPE


def uses_shared_path(batch_dependent, factored_masks, dropout, training,
                     return_attention_scores, fast_paths=True):
    """Whether attention can run on `H x T x S` probabilities.

    Args:
        batch_dependent: whether the logits depend on the input.
        factored_masks: the masks as `attention_masks.factor_masks` returns
            them; `None` when a per-example or per-head `attention_mask`
            does not factor.
        dropout: the dropout rate; active dropout needs per-example masks.
        training: whether dropout is active.
        return_attention_scores: the scores are `B x H x T x S` anyway.
        fast_paths: `False` always answers `False` (the general path).
    """
    return (
        fast_paths
        and not batch_dependent
        and factored_masks is not None
        and not return_attention_scores
        and not (dropout > 0.0 and training)
    )


def shared_attention(logits, values, rows=None, keys=None, pattern=None):
    """Attention with batch-independent `(H, T, S)` logits.

    Args:
        logits: `(H, T, S)` logits.
        values: projected values `(B, S, H, value_dim)`.
        rows: boolean query mask `(B, T)` or `None`.
        keys: boolean key padding mask `(B, S)` or `None`.
        pattern: boolean batch-independent mask `(T, S)` or `None`.

    Returns:
        `attention_output (B, T, H, value_dim)`, equal to the general path's.
    """
    if keys is None:
        mask = None if pattern is None else ops.expand_dims(pattern, 0)
        probs = masked_softmax(logits, mask)
        output = ops.einsum(
            "nts,bsnh->btnh", ops.cast(probs, values.dtype), values
        )
    else:
        output = key_padded_attention(logits, values, keys, pattern)
    if rows is not None:
        output = zero_rows(output, rows)
    return output


def key_padded_attention(logits, values, keys, pattern=None):
    """Shared logits with a per-example key padding mask `keys (B, S)`:
    normalised after the values where safe, else one example at a time.

    The unnormalised weights and both products run in `work_dtype` (float32
    for any 16-bit compute dtype; see the module docstring); the output has
    the values' dtype.
    """
    output_dtype = values.dtype
    dtype = work_dtype(logits.dtype)
    logits = ops.cast(logits, dtype)
    allowed = ops.any(keys, axis=0, keepdims=True)  # (1, S)
    if pattern is not None:
        allowed = ops.logical_and(allowed, pattern)  # (T, S)
    finite = LOWEST[keras.backend.standardize_dtype(dtype)]
    masked = ops.where(
        allowed, logits, ops.convert_to_tensor(finite, dtype=dtype)
    )
    shift = ops.stop_gradient(ops.max(masked, axis=-1, keepdims=True))
    lowest = ops.min(
        ops.where(allowed, logits, ops.convert_to_tensor(-finite, dtype=dtype)),
        axis=-1,
    )
    spread = ops.stop_gradient(ops.squeeze(shift, -1) - lowest)
    safe = ops.all(ops.less(spread, ops.cast(SAFE_SPREAD, dtype)))
    key_weights = ops.expand_dims(ops.expand_dims(keys, -1), -1)

    def normalise_after():
        weights = ops.where(
            allowed, ops.exp(masked - shift), ops.cast(0.0, dtype)
        )
        denominator = ops.einsum("nts,bs->btn", weights, ops.cast(keys, dtype))
        # In `dtype`, not the compute dtype: the weights are unnormalised
        # and would underflow in float16 (the module docstring).
        numerator = ops.einsum(
            "nts,bsnh->btnh",
            weights,
            ops.cast(values, dtype) * ops.cast(key_weights, dtype),
        )
        denominator = ops.where(
            denominator > 0, denominator, ops.ones_like(denominator)
        )
        return ops.cast(
            numerator / ops.expand_dims(denominator, -1), output_dtype
        )

    def fall_back():
        return per_example_attention(
            logits, values, ops.cast(keys, dtype), pattern
        )

    return branch(safe, normalise_after, fall_back)


def per_example_attention(logits, values, float_keys, pattern=None):
    """Exact attention for any logits, one example at a time.

    Args:
        logits: `(H, T, S)` logits.
        values: `(B, S, H, value_dim)` values.
        float_keys: key padding mask `(B, S)` as 0/1 floats.
        pattern: boolean `(T, S)` mask or `None`.
    """

    @keras.remat
    def one_example(example_logits, example_values, example_keys):
        # The logits are an argument, not a closure, for their gradient.
        # A zero of the keys' dtype: PyTorch's ONNX exporter keeps a
        # Python 0 as int32, and ONNX's Greater needs one type.
        zero = ops.zeros((), example_keys.dtype)
        mask = ops.expand_dims(ops.greater(example_keys, zero), 0)
        if pattern is not None:
            mask = ops.logical_and(mask, pattern)  # (T, S)
        probs = masked_softmax(example_logits, ops.expand_dims(mask, 0))
        return ops.einsum(
            "nts,snh->tnh", ops.cast(probs, values.dtype), example_values
        )

    @keras.remat
    def per_example(logits, values, float_keys):
        return ops.map(
            lambda inputs: one_example(logits, *inputs), (values, float_keys)
        )

    return per_example(logits, values, float_keys)
