"""From projected inputs and masks to attention outputs: which path runs.

`attend` computes the (mixed) logits of the synthesizers and sends them
down one of two paths (a convolution synthesizer alone with padding,
causal or sliding-window masks takes a third, `windowed_attention`, which
never builds `T x S` logits; a variant with a dot-product part takes
`keras.ops.dot_product_attention` where `flash_attention` asks for it or
on an accelerator, `fused_attention`):

- the batch-shared path (`shared_attention`): batch-independent logits
  (random, fixed random, factorized random and their mixtures) with masks
  that factor into query rows `(B, T)`, key padding `(B, S)` and a
  batch-independent pattern `(T, S)` (causal, sliding window, an
  `attention_mask` of shape `(T, S)`, `(1, T, S)` or `(B, 1, S)`), no
  returned scores and no active dropout; past `2 * query_blocks.QUERY_BLOCK`
  query rows, one block of queries at a time (`query_blocks`);
- the general path (`general_attention`): everything else, with
  `B x H x T x S` probabilities.

`fast_paths=False` turns every fast path off (batch-shared attention, the
fused mixture contraction, late zeroing of empty rows): the plain
computation the fast paths must equal, which the tests compare them with.
"""

from keras import ops

from keras_synth.layers.attention import masks as attention_masks
from keras_synth.layers.attention import fused as fused_attention
from keras_synth.layers.attention import general as general_attention
from keras_synth.layers.synthesizers import mixture
from keras_synth.layers.attention import query_blocks
from keras_synth.layers.attention import shared as shared_attention
from keras_synth.layers.attention import windowed as windowed_attention


def attend(
    synthesizers,
    mixture_weights,
    query,
    keys,
    values,
    query_start=0,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    sliding_window=None,
    dropout_layer=None,
    training=None,
    return_attention_scores=False,
    scores_dtype=None,
    fast_paths=True,
    compute_logits=None,
    masked_softmax=None,
    flash_attention=None,
):
    """Synthesized attention of projected inputs.

    Args:
        synthesizers: the component `Synthesizer` layers (built).
        mixture_weights: `(H, N)` normalised weights, `None` for one.
        query: the query input `(B, T, d)`.
        keys: projected keys `(B, S, H, key_dim)`, `None` without a
            dot-product component.
        values: projected values `(B, S, H, value_dim)`.
        query_start: position of the first query row.
        query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
        sliding_window: as the layer's arguments.
        dropout_layer, training: dropout on the probabilities.
        return_attention_scores: whether to return `(B, H, T, S)` scores.
        scores_dtype: dtype of the scores.
        fast_paths: see the module docstring.
        compute_logits: optional `f(query, keys, query_start, T, S)` that
            replaces the mixture of the synthesizers' logits (a layer's
            overridden `_compute_logits`); only with `fast_paths=False`.
        masked_softmax: optional `f(logits, mask)` that replaces the masked
            softmax (a layer's overridden `_masked_softmax`); only with
            `fast_paths=False`.
        flash_attention: the layer's `flash_attention`, resolved: whether
            a variant with a dot-product part takes the fused path
            (`fused_attention.uses_fused_path`).

    Returns:
        `(attention_output (B, T, H, value_dim), scores or None)`.
    """
    query_length = ops.shape(query)[1]
    key_length = ops.shape(values)[1]
    rows, padded_keys = attention_masks.padding_masks(
        query_length, key_length, query_mask, value_mask, key_mask
    )
    if attention_mask is not None:
        attention_masks.check_attention_mask(
            attention_mask, synthesizers[0].num_heads, query_length,
            key_length,
        )
    dropout = 0.0 if dropout_layer is None else dropout_layer.rate
    windowed = None
    if fast_paths and not return_attention_scores and not (
            dropout > 0.0 and training):
        windowed = windowed_attention.windowed_synthesizer(
            synthesizers, attention_mask)
    if windowed is not None:
        # A convolution alone: K taps per query, never `T x S`.
        if attention_mask is not None:  # (B|1, 1, S): key padding
            allowed = ops.cast(attention_mask[:, 0, :], "bool")
            padded_keys = allowed if padded_keys is None else (
                ops.logical_and(padded_keys, allowed))
        return windowed_attention.windowed_attention(
            windowed, query, values, query_start, rows, padded_keys,
            use_causal_mask, sliding_window,
        ), None

    def pattern_of(start, length):
        """The causal mask, the sliding window and the synthesizers'
        windows (`Synthesizer.window`) of the query rows at positions
        `start ... start + length - 1`, `(length, S)` or `None`."""
        pattern = attention_masks.pattern_mask(
            length, key_length, use_causal_mask, sliding_window, start,
        )
        for synthesizer in synthesizers:
            window = synthesizer.window(start, length, key_length)
            if window is not None:
                pattern = (window if pattern is None
                           else ops.logical_and(pattern, window))
        return pattern

    pattern = pattern_of(query_start, query_length)
    if fused_attention.uses_fused_path(
            synthesizers, flash_attention, fast_paths, dropout, training,
            return_attention_scores):
        merged = attention_masks.merge_masks(
            rows, padded_keys, pattern, attention_mask)
        return fused_attention.attend(
            synthesizers, mixture_weights, query, keys, values, query_start,
            merged, flash_attention), None
    factored = attention_masks.factor_masks(
        rows, padded_keys, pattern, attention_mask
    )
    shared = shared_attention.uses_shared_path(
        any(s.batch_dependent for s in synthesizers), factored, dropout,
        training, return_attention_scores, fast_paths=fast_paths,
    )
    block = query_blocks.query_block_size(query_length) if shared else None
    if block is not None:
        # The pattern is built per block of rows, never `T x S` at once.
        rows, padded_keys, mask_pattern = attention_masks.factor_masks(
            rows, padded_keys, None, attention_mask
        )

        def block_pattern(start, length):
            pattern = pattern_of(query_start + start, length)
            if mask_pattern is None:
                return pattern
            rows_of_mask = ops.slice(mask_pattern, (start, 0),
                                     (length, key_length))
            if pattern is None:
                return rows_of_mask
            return ops.logical_and(pattern, rows_of_mask)

        return query_blocks.blocked_shared_attention(
            synthesizers, mixture_weights, query_start, query_length, values,
            rows, padded_keys, block_pattern, block=block,
        ), None
    if compute_logits is not None:
        logits = compute_logits(
            query, keys, query_start, query_length, key_length)
    else:
        logits = mixture.mixed_logits(
            synthesizers,
            mixture_weights,
            (query, keys, query_start, query_length, key_length),
            fast_paths=fast_paths,
        )
    if shared:
        return shared_attention.shared_attention(logits, values, *factored), None
    return general_attention.attend(
        logits,
        values,
        attention_masks.merge_masks(rows, padded_keys, pattern, attention_mask),
        dropout_layer=dropout_layer,
        training=training,
        return_attention_scores=return_attention_scores,
        scores_dtype=scores_dtype,
        fast_paths=fast_paths,
        masked_softmax=masked_softmax,
    )

