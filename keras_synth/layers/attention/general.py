"""The general attention path: probabilities of shape `B x H x T x S`.

Every variant and every mask can run here: the masked softmax over keys,
dropout on the probabilities, their product with the values, and the
returned scores. `shared_attention` avoids the `B x H x T x S` tensor where
the logits do not depend on the example.
"""

from keras import ops

from keras_synth.layers.attention import masks as attention_masks
from keras_synth.layers.attention.masks import nonempty_rows
from keras_synth.layers.attention.masks import zero_rows


def attend(
    logits,
    values,
    mask=None,
    dropout_layer=None,
    training=None,
    return_attention_scores=False,
    scores_dtype=None,
    fast_paths=True,
    masked_softmax=None,
):
    """Applies the masked softmax to `logits` and combines `values`.

    Args:
        logits: `(B, H, T, S)` or batch-independent `(H, T, S)` logits.
        values: projected values `(B, S, H, value_dim)`.
        mask: merged boolean mask (`attention_masks.merge_masks`) or `None`.
        dropout_layer: a `keras.layers.Dropout` applied to the probabilities
            when `training`, or `None`.
        training: whether dropout is active.
        return_attention_scores: whether to return the probabilities too.
        scores_dtype: dtype of the returned scores (the compute dtype).
        fast_paths: with `True`, rows without any key are zeroed after the
            product with the values (`B x T x H` numbers) instead of in the
            `B x H x T x S` probabilities; the returned scores are masked
            exactly either way. `False` is the plain reference computation.
        masked_softmax: optional `f(logits, mask)` returning probabilities
            in place of the built-in masked softmax (rows as it returns
            them).

    Returns:
        `(attention_output (B, T, H, value_dim), attention_scores)`, the
        scores `(B, H, T, S)` only if `return_attention_scores`, else `None`.
    """
    late = (fast_paths and mask is not None and not return_attention_scores
            and masked_softmax is None)
    if masked_softmax is not None:
        probs = masked_softmax(logits, mask)
    else:
        probs = attention_masks.masked_softmax(logits, mask, empty_rows=not late)
    batch_size = ops.shape(values)[0]
    dropped = probs
    if dropout_layer is not None and dropout_layer.rate > 0.0 and training:
        if len(probs.shape) == 3:
            # Each example gets its own dropout mask.
            dropped = ops.broadcast_to(
                probs, (batch_size,) + tuple(ops.shape(probs))
            )
        dropped = dropout_layer(dropped, training=training)
    dropped = ops.cast(dropped, values.dtype)
    if len(dropped.shape) == 3:
        output = ops.einsum("nts,bsnh->btnh", dropped, values)
    else:
        output = ops.einsum("bnts,bsnh->btnh", dropped, values)
    if late:
        output = zero_rows(output, nonempty_rows(mask))
    scores = None
    if return_attention_scores:
        scores = ops.cast(probs, scores_dtype or probs.dtype)
        if len(scores.shape) == 3 or scores.shape[0] == 1:
            shape = tuple(ops.shape(scores))[-3:]
            scores = ops.broadcast_to(scores, (batch_size,) + shape)
    return output, scores
