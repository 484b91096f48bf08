"""Attention masks: building, checking, merging, and the masked softmax.

`True` means "may attend", as in `keras.layers.MultiHeadAttention`. The
layer sees up to six masks: the query padding mask `(B, T)`, the value and
key padding masks `(B, S)`, the causal mask, the sliding-window band and
the user's `attention_mask`, which may be `(T, S)`, `(B, T, S)` (either axis
of size 1 where it broadcasts, e.g. the key padding mask `(B, 1, S)`) or
per head `(B, H, T, S)`.

Two representations of their conjunction exist:

- merged (`merge_masks`): one boolean `(B|1, T, S)` or `(B|1, H, T, S)`
  tensor, as the general path's `B x H x T x S` softmax needs;
- factored (`factor_masks`): rows `(B, T)`, keys `(B, S)` and a
  batch-independent pattern `(T, S)`, kept apart so that batch-independent
  logits never meet a `B x H x T x S` tensor (`shared_attention`).

A query row with no key left gets all-zero probabilities, hence a zero
attention output (not NaN, not a uniform average).
"""

import keras
from keras import ops

from keras_synth.layers.keras_utils import is_int

# The lowest finite value of each float dtype, for masked logits.
LOWEST = {
    "float16": -65504.0,
    "bfloat16": -3.3895313892515355e38,
    "float32": -3.4028234663852886e38,
    "float64": -1.7976931348623157e308,
}


def lowest_value(dtype):
    """The lowest finite value of `dtype` as a scalar tensor of `dtype`."""
    dtype = keras.backend.standardize_dtype(dtype)
    # (convert_to_tensor, not cast: TensorFlow first makes a Python float a
    # float32 tensor, and float64's lowest value overflows it.)
    return ops.convert_to_tensor(LOWEST[dtype], dtype=dtype)


def positions(query_length, query_start=0):
    """Positions `query_start + i` of the query rows, int32 `(T,)`."""
    return ops.arange(0, query_length, dtype="int32") + ops.cast(
        query_start, "int32"
    )


def causal_mask(query_length, key_length, query_start=0):
    """`(T, S)`: the query at position `query_start + i` sees keys `0..` it."""
    rows = positions(query_length, query_start)
    cols = ops.arange(0, key_length, dtype="int32")
    return ops.greater_equal(
        ops.expand_dims(rows, -1), ops.expand_dims(cols, 0)
    )


def sliding_window_mask(query_length, key_length, window, query_start=0):
    """`(T, S)`: keys within `window - 1` positions of the query's, either
    side (`MultiHeadAttention`'s `sliding_window` band)."""
    rows = positions(query_length, query_start)
    cols = ops.arange(0, key_length, dtype="int32")
    distance = ops.abs(ops.expand_dims(rows, -1) - ops.expand_dims(cols, 0))
    return ops.less(distance, window)


def check_mask(arg, mask, expected, broadcastable=False):
    """Checks a mask's static shape against `expected`.

    `expected` is a tuple of ints or names (`"batch"` and friends are
    free); with `broadcastable`, any axis may also have size 1.
    """
    shape = tuple(mask.shape)
    ok = len(shape) == len(expected) and all(
        not is_int(e)
        or not is_int(s)
        or s == e
        or (broadcastable and s == 1)
        for s, e in zip(shape, expected)
    )
    if not ok:
        raise ValueError(
            f"Argument `{arg}` has the wrong shape. Expected "
            f"{tuple(expected)}"
            + (" or 1 where it broadcasts" if broadcastable else "")
            + f" (True = may attend). Received: {arg}.shape={shape}"
        )


def check_attention_mask(attention_mask, num_heads, query_length, key_length):
    """Checks `attention_mask`: `(T, S)`, `(B, T, S)` or `(B, H, T, S)`."""
    shape = tuple(attention_mask.shape)
    options = {
        2: (query_length, key_length),
        3: ("batch", query_length, key_length),
        4: ("batch", num_heads, query_length, key_length),
    }
    if len(shape) not in options:
        raise ValueError(
            "Argument `attention_mask` has the wrong rank. Expected (T, S), "
            "(batch, T, S) or (batch, num_heads, T, S) with T="
            f"{query_length}, S={key_length}. Received: "
            f"attention_mask.shape={shape}"
        )
    check_mask(
        "attention_mask", attention_mask, options[len(shape)],
        broadcastable=True,
    )


def split_attention_mask(attention_mask):
    """Splits a factorable `attention_mask` into `(keys, pattern)`.

    A `(B, 1, S)` mask is a key padding mask: `keys (B, S)`. A `(T, S)` or
    `(1, T, S)` mask does not depend on the example: `pattern (T, S)`.
    Returns `None` for any other mask (per example or per head), which
    needs the merged `B x H x T x S` representation.
    """
    shape = tuple(attention_mask.shape)
    mask = ops.cast(attention_mask, "bool")
    if len(shape) == 2:
        return None, mask
    if len(shape) == 3 and shape[0] == 1:
        return None, mask[0]
    if len(shape) == 3 and shape[1] == 1:
        return mask[:, 0, :], None
    return None


def _and(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return ops.logical_and(a, b)


def pattern_mask(query_length, key_length, use_causal_mask=False,
                 sliding_window=None, query_start=0):
    """The conjunction of the causal and sliding-window masks, `(T, S)`."""
    pattern = None
    if use_causal_mask:
        pattern = causal_mask(query_length, key_length, query_start)
    if sliding_window is not None:
        band = sliding_window_mask(
            query_length, key_length, sliding_window, query_start
        )
        pattern = _and(pattern, band)
    return pattern


def padding_masks(query_length, key_length, query_mask=None, value_mask=None,
                  key_mask=None):
    """Checked boolean `(rows (B, T), keys (B, S))`, each maybe `None`."""
    rows = None
    if query_mask is not None:
        check_mask("query_mask", query_mask, ("batch", query_length))
        rows = ops.cast(query_mask, "bool")
    keys = None
    for arg, mask in (("value_mask", value_mask), ("key_mask", key_mask)):
        if mask is not None:
            check_mask(arg, mask, ("batch", key_length))
            keys = _and(keys, ops.cast(mask, "bool"))
    return rows, keys


def factor_masks(rows, keys, pattern, attention_mask=None):
    """`(rows, keys, pattern)` with a factorable `attention_mask` folded in.

    Returns `None` if `attention_mask` does not factor
    (`split_attention_mask`).
    """
    if attention_mask is None:
        return rows, keys, pattern
    split = split_attention_mask(attention_mask)
    if split is None:
        return None
    return rows, _and(keys, split[0]), _and(pattern, split[1])


def merge_masks(rows, keys, pattern, attention_mask=None):
    """The conjunction of all masks: `(B|1, T, S)`, or `(B|1, H, T, S)`
    with a per-head `attention_mask`; `None` without any mask."""
    merged = None
    if rows is not None:
        merged = ops.expand_dims(rows, -1)
    if keys is not None:
        merged = _and(merged, ops.expand_dims(keys, -2))
    merged = _and(merged, pattern)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if len(attention_mask.shape) == 4 and merged is not None:
            merged = ops.expand_dims(merged, -3)  # (B|1, 1, T, S)
        merged = _and(merged, attention_mask)
    if merged is not None and len(merged.shape) == 2:
        merged = ops.expand_dims(merged, 0)
    return merged


def softmax_over_keys(logits):
    """`ops.softmax(logits, axis=-1)`; ones over a single key.

    A single key (cached decoding of the first position) gets probability
    1 whatever its logit: computed without the softmax, over which Keras
    warns for an axis of size 1.
    """
    if logits.shape[-1] == 1:
        return ops.ones_like(logits)
    return ops.softmax(logits, axis=-1)


def masked_softmax(logits, mask=None, empty_rows=True):
    """Softmax over keys; masked keys get exactly 0.

    Args:
        logits: `(B, H, T, S)` or batch-independent `(H, T, S)` logits.
        mask: boolean `(B|1, T, S)` or `(B|1, H|1, T, S)`, or `None`.
        empty_rows: whether rows without any key get all-zero
            probabilities; with `False` they stay uniform and the caller
            zeroes their outputs after the product with the values
            (`zero_rows`), which touches `B x T` numbers instead of
            `B x H x T x S`.
    """
    if mask is None:
        return softmax_over_keys(logits)
    if len(logits.shape) == 3 and mask.shape[0] == 1:
        mask = mask[0]  # (T, S) or (H, T, S): logits stay batch-independent.
    elif len(mask.shape) == 3:
        mask = ops.expand_dims(mask, 1)  # (B, 1, T, S)
    # The lowest finite value, not -1e9: logits below -1e9 (large inputs to
    # a dot-product part) would otherwise hand masked keys the weight.
    probs = softmax_over_keys(
        ops.where(mask, logits, lowest_value(logits.dtype))
    )
    if not empty_rows:
        return probs
    return probs * ops.cast(mask, probs.dtype)


def nonempty_rows(mask):
    """Which query rows keep a key: `(B|1, T)`, or `(B|1, T, H|1)` for a
    per-head mask, laid out like the `(B, T, H, k)` attention output."""
    rows = ops.any(mask, axis=-1)
    if len(rows.shape) == 3:
        rows = ops.transpose(rows, (0, 2, 1))
    return rows


def zero_rows(output, rows):
    """Zeroes the `(B, T, H, k)` outputs where the boolean `rows`
    (`(B|1, T)` or `(B|1, T, H|1)`) is False."""
    rows = ops.cast(rows, output.dtype)
    if len(rows.shape) == 2:
        rows = ops.expand_dims(rows, -1)
    return output * ops.expand_dims(rows, -1)
