"""The fused path: attention with a dot-product part through
`keras.ops.dot_product_attention`.

A variant with a `vanilla` component computes `softmax(L) V` with
`L = a_h Q K^T / sqrt(k) + B`: vanilla's logits, its per-head mixture
weight `a_h` folded into the queries, plus the other components' mixed
logits `B` (`mixture.mixed_logits`), a bias. That is what
`keras.ops.dot_product_attention(Q', K, V, bias=B, scale=1)` computes, and
on GPUs and TPUs it runs as one fused kernel (cuDNN, flash attention)
where the general path builds `B x H x T x S` logits, probabilities and
their product as separate operations. On the CPU no kernel fuses them and
the general path is not slower (docs/performance.md), so the layer takes
this path where `flash_attention` asks for it (`True`) or, by default
(`None`), on an accelerator (`uses_fused_path`).

Masks: the merged boolean mask (`attention_masks.merge_masks`) goes to the
op as its `mask`; with a bias on PyTorch, whose op takes one or the other,
masked keys get the lowest finite logit in the bias instead. A query row
with no key left is zeroed after the product with the values
(`zero_rows`), as on the other paths (the op would return a uniform
average of the values).
"""

import keras
from keras import ops

from keras_synth.layers.attention import masks as attention_masks
from keras_synth.layers.keras_utils import on_accelerator
from keras_synth.layers.synthesizers import mixture


def uses_fused_path(synthesizers, flash_attention, fast_paths, dropout,
                    training, return_attention_scores):
    """Whether `attend` runs: a component is `vanilla`, the fast paths are
    on, no scores are returned, no dropout is active, and `flash_attention`
    is `True` (or `None` on a GPU or TPU)."""
    if flash_attention is False or not fast_paths:
        return False
    if return_attention_scores or (dropout > 0.0 and training):
        return False
    if not any(s.variant == "vanilla" for s in synthesizers):
        return False
    return bool(flash_attention) or on_accelerator()


def attend(synthesizers, mixture_weights, query, keys, values, query_start,
           mask, flash_attention=None):
    """Attention through `ops.dot_product_attention`.

    Args:
        synthesizers: the component `Synthesizer` layers, one `vanilla`.
        mixture_weights: `(H, N)` normalised weights, `None` for one.
        query: the query input `(B, T, d)`.
        keys: projected keys `(B, S, H, key_dim)`.
        values: projected values `(B, S, H, value_dim)`.
        query_start: position of the first query row.
        mask: the merged boolean mask (`attention_masks.merge_masks`):
            `(B|1, T, S)`, `(B|1, H|1, T, S)` or `None`.
        flash_attention: passed to `ops.dot_product_attention`.

    Returns:
        The attention output `(B, T, H, value_dim)`.
    """
    index = [s.variant for s in synthesizers].index("vanilla")
    scale = None if mixture_weights is None else mixture_weights[:, index]
    others = [s for i, s in enumerate(synthesizers) if i != index]
    bias = None
    if others:  # a mixture: `mixture_weights` is `(H, N)`
        weights = ops.concatenate(
            [mixture_weights[:, :index], mixture_weights[:, index + 1:]], 1)
        args = (query, keys, query_start, ops.shape(query)[1],
                ops.shape(values)[1])
        if len(others) == 1:
            bias = others[0].scaled_logits(*args, scale=weights[:, 0])
        else:
            bias = mixture.mixed_logits(others, weights, args)
        if len(bias.shape) == 3:
            bias = ops.expand_dims(bias, 0)  # (1, H, T, S)
    scaled_query = synthesizers[index].scaled_query(query, scale)
    dtype = values.dtype
    if mask is not None and len(mask.shape) == 3:
        mask = ops.expand_dims(mask, 1)  # (B|1, 1, T, S)
    op_mask = mask
    if bias is not None:
        bias = ops.cast(bias, dtype)
        if mask is not None and keras.backend.backend() == "torch":
            bias = ops.where(mask, bias, attention_masks.lowest_value(dtype))
            op_mask = None
    output = ops.dot_product_attention(
        ops.cast(scaled_query, dtype),
        ops.cast(keys, dtype),
        values,
        bias=bias,
        mask=op_mask,
        scale=1.0,
        flash_attention=flash_attention,
    )
    if mask is not None:
        output = attention_masks.zero_rows(
            output, attention_masks.nonempty_rows(mask))
    return output
