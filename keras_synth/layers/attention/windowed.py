"""The windowed path: a convolution synthesizer alone, as a convolution.

`light_conv` and `dynamic_conv` give each query `K = kernel_size` logits,
one per tap of its window (`tap_logits`: `(H, K)` or `(B, T, H, K)`). Alone
in the layer, with masks that are padding (query rows `(B, T)`, keys
`(B, S)`, an `attention_mask` of shape `(B, 1, S)`), the causal mask or a
sliding window, attention is

    y_h[t] = sum_j softmax_j(l_h[t]) v_h[t + j - before],

the softmax over the taps whose keys exist and are allowed, `B x T x H x K`
probabilities. The sum runs by blocks of `C = K` queries: each block's
`(C, K)` probabilities, skewed into a `(C, C + K - 1)` band, times the
block's `C + K - 1` value rows (the values padded once along the length, or
the rows around the queries when decoding), one matmul per block. Memory is
linear in the length, `B x T x H x (2K - 1 + 2 value_dim)`; neither the
`K` copies of the values (`B x T x K x H x value_dim`, 248 MB at 4,096
tokens with `K = 31`, the gather this path used to take) nor the `T x S`
logits, masks and probabilities of the other paths are built. It equals
the general path (which `fast_paths=False`, returned scores, active
dropout, a mixture or any other `attention_mask` take).
"""

from keras import ops

from keras_synth.layers.attention.masks import lowest_value
from keras_synth.layers.attention.masks import softmax_over_keys
from keras_synth.layers.attention.masks import zero_rows
from keras_synth.layers.synthesizers.convolution import ConvolutionSynthesizer
from keras_synth.layers.synthesizers.convolution import window_sides


def windowed_synthesizer(synthesizers, attention_mask=None):
    """The convolution synthesizer that the windowed path can run alone,
    or `None` (a mixture, another variant, an `attention_mask` other than
    key padding `(B|1, 1, S)`)."""
    if len(synthesizers) != 1:
        return None
    if not isinstance(synthesizers[0], ConvolutionSynthesizer):
        return None
    if attention_mask is not None and (len(attention_mask.shape) != 3
                                       or attention_mask.shape[1] != 1):
        return None
    return synthesizers[0]


def windowed_attention(synthesizer, query, values, query_start=0, rows=None,
                       keys=None, use_causal_mask=False, sliding_window=None):
    """Attention of a convolution synthesizer over its window.

    Args:
        synthesizer: a built `ConvolutionSynthesizer`.
        query: the query input `(B, T, d)`.
        values: projected values `(B, S, H, value_dim)`.
        query_start: position of the first query row.
        rows: boolean query mask `(B, T)` or `None`.
        keys: boolean key mask `(B|1, S)` or `None`.
        use_causal_mask, sliding_window: as the layer's arguments.

    Returns:
        `attention_output (B, T, H, value_dim)`.
    """
    size = synthesizer.kernel_size
    before, _ = window_sides(size, synthesizer.padding)
    query_length = ops.shape(query)[1]
    key_length = ops.shape(values)[1]
    offsets = ops.arange(0, size, dtype="int32") - before  # (K,)
    sources = (ops.arange(0, query_length, dtype="int32")
               + ops.cast(query_start, "int32"))[:, None] + offsets  # (T, K)
    allowed = ops.logical_and(ops.greater_equal(sources, 0),
                              ops.less(sources, key_length))
    if use_causal_mask:
        allowed = ops.logical_and(allowed, ops.less_equal(offsets, 0))
    if sliding_window is not None:
        allowed = ops.logical_and(
            allowed, ops.less(ops.abs(offsets), sliding_window))
    sources = ops.clip(sources, 0, key_length - 1)
    allowed = ops.expand_dims(allowed, 0)  # (1, T, K)
    if keys is not None:
        allowed = ops.logical_and(allowed, ops.take(keys, sources, axis=1))
    logits = synthesizer.tap_logits(query, query_start, query_length)
    if len(logits.shape) == 2:
        logits = logits[None, None]  # (1, 1, H, K)
    mask = ops.expand_dims(allowed, 2)  # (B|1, T, 1, K)
    probs = softmax_over_keys(
        ops.where(mask, logits, lowest_value(logits.dtype)))
    probs = probs * ops.cast(mask, probs.dtype)  # no key left: zeros
    # (einsum broadcasts no axis of size 1 on TensorFlow)
    probs = ops.broadcast_to(ops.cast(probs, values.dtype),
                             (ops.shape(values)[0], query_length,
                              synthesizer.num_heads, size))
    output = _banded_sum(probs, values, query_start, query_length,
                         key_length, before, size)
    if rows is not None:
        output = zero_rows(output, rows)
    return output


def _banded_sum(probs, values, query_start, query_length, key_length,
                before, size):
    """`sum_j probs[b, t, h, j] values[b, query_start + t + j - before, h]`
    by blocks of `C = K` queries: each block's `(C, C + K - 1)` band of
    probabilities (skewed from `(C, K)`) times its `C + K - 1` value rows, a
    matmul; memory `B x T x H x (2K - 1 + 2 value_dim)`, never the `K`
    copies."""
    batch, _, heads, _ = ops.shape(probs)
    depth = ops.shape(values)[-1]
    block = size
    blocks = (query_length + block - 1) // block
    padded = blocks * block
    window = _window_rows(values, query_start, padded + block, key_length,
                          before)  # (B, padded + C, H, value_dim)
    here = ops.reshape(window[:, :padded], (batch, blocks, block, heads,
                                            depth))
    ahead = ops.reshape(window[:, block:padded + block],
                        (batch, blocks, block, heads, depth))[:, :, :size - 1]
    rows = ops.concatenate([here, ahead], axis=2)  # (B, n, C + K - 1, H, d)
    probs = ops.pad(probs, ((0, 0), (0, padded - query_length), (0, 0),
                            (0, 0)))
    probs = ops.transpose(ops.reshape(probs, (batch, blocks, block, heads,
                                              size)), (0, 1, 3, 2, 4))
    # Skew: row i of (C, K + C) flattened and read C + K - 1 wide starts
    # i columns further right.
    band = ops.pad(probs, ((0, 0), (0, 0), (0, 0), (0, 0), (0, block)))
    band = ops.reshape(band, (batch, blocks, heads, block * (block + size)))
    band = ops.reshape(band[..., :block * (block + size - 1)],
                       (batch, blocks, heads, block, block + size - 1))
    output = ops.einsum("bnhqw,bnwhd->bnqhd", band, rows)
    return ops.reshape(output, (batch, padded, heads, depth))[
        :, :query_length]


def _window_rows(values, query_start, rows, key_length, before):
    """`(B, rows, H, value_dim)`: the value rows of positions
    `query_start - before ...`, row `i + j` the source of query `i`'s tap
    `j`; rows outside `0 ... S - 1` are zeros (padding) or a clipped copy
    (the gather), both under a zero probability."""
    if (isinstance(query_start, int) and query_start == 0
            and isinstance(rows, int) and isinstance(key_length, int)):
        # Training and uncached calls: pad once, `before` zeros in front.
        behind = max(0, rows - before - key_length)
        window = ops.pad(values, ((0, 0), (before, behind), (0, 0), (0, 0)))
        return window[:, :rows]
    # Cached decoding (a traced `query_start`, or lengths not known): the
    # rows around the queries, however long the keys.
    sources = (ops.arange(0, rows, dtype="int32")
               + ops.cast(query_start, "int32") - before)
    return ops.take(values, ops.clip(sources, 0, key_length - 1), axis=1)
