"""Helpers shared by the keras-nlp blocks (`SynthesizerEncoder/Decoder`).

Shared by the two block modules, not exported: masks merged the way keras-nlp's Transformer blocks merge
them, Keras masks detached while an attention layer runs, early validation
of the synthesizer arguments.
"""

import contextlib

import keras
from keras import ops

from keras_synth.layers.attention_masks import causal_mask
from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.layers.keras_utils import get_keras_mask
from keras_synth.layers.keras_utils import set_keras_mask
from keras_synth.layers.synthesizer_attention import SynthesizerAttention

try:  # keras-nlp is keras-hub since 0.18; both names work.
    import keras_hub as keras_nlp
except ImportError:  # pragma: no cover - older installs
    import keras_nlp


def check_synthesizer_arguments(num_heads, synthesizer_kwargs, prefix=""):
    """Raises the layer's own `ValueError` for bad synthesizer arguments.

    Blocks create their attention in `build` (its `key_dim` depends on the
    input width), so a throwaway, never built `SynthesizerAttention` checks
    the arguments when the block is constructed.
    """
    try:
        SynthesizerAttention(num_heads=num_heads, key_dim=1, **synthesizer_kwargs)
    except ValueError as error:
        if not prefix:
            raise
        raise ValueError(f"{prefix}: {error}") from None


@contextlib.contextmanager
def keras_masks_detached(*tensors):
    """Clears the Keras masks of `tensors` inside the block, restores them after.

    The blocks merge Keras masks into explicit attention masks (as keras-nlp
    does), so the attention layer must not pick them up a second time (with
    a cache, a `(B, 1)` query mask would not even match the cache length).
    `SynthesizerAttention`, like `MultiHeadAttention`, clears the masks of
    its inputs; restoring them keeps e.g. the encoder output's mask for the
    next decoder block of a stack.
    """
    saved = [(t, get_keras_mask(t)) for t in tensors if t is not None]
    for tensor, _ in saved:
        set_keras_mask(tensor, None)
    try:
        yield
    finally:
        for tensor, mask in saved:
            if mask is not None:
                set_keras_mask(tensor, mask)


def _check_rank(arg, mask, rank):
    if mask is not None and len(mask.shape) != rank:
        raise ValueError(
            f"Argument `{arg}` should have rank {rank}: "
            + (
                "(batch_size, sequence_length)"
                if rank == 2
                else "(batch_size, target_length, source_length)"
            )
            + f". Received: {arg}.shape={tuple(mask.shape)}"
        )


def merge_masks(
    inputs,
    padding_mask,
    attention_mask,
    query_length,
    key_length,
    causal=False,
    query_start=0,
    padding_arg="padding_mask",
    attention_arg="attention_mask",
    padding_is_key_mask=True,
):
    """Merges masks as keras-nlp's blocks do, in the attention layer's terms.

    `padding_mask` (or, when it is `None`, the Keras mask of `inputs`) masks
    keys, `(B, 1, S)` after keras-nlp's broadcast; `attention_mask` is
    `(B, T, S)`; both `True` where attention is allowed. With `causal`,
    query row `i` (at position `query_start + i`) sees keys
    `0 .. query_start + i`.

    Returns the keyword arguments `attention_mask`, `value_mask` and
    `use_causal_mask` for `SynthesizerAttention`. With
    `padding_is_key_mask` (the padding mask has the keys' length) padding
    and causal masks stay factored, so that batch-independent synthesizers
    keep `H x T x S` logits where the layer can. Otherwise (a cached
    decoding step, whose padding mask covers the new tokens only) the masks
    are merged into one `(B, T, S)` mask by keras-nlp's broadcasting rules.
    """
    _check_rank(padding_arg, padding_mask, 2)
    _check_rank(attention_arg, attention_mask, 3)
    padding = padding_mask
    if padding is None:
        padding = get_keras_mask(inputs)
    if padding is not None:
        padding = ops.cast(padding, "bool")
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
    if padding_is_key_mask or padding is None:
        return dict(
            attention_mask=attention_mask,
            value_mask=padding,
            use_causal_mask=causal,
        )
    masks = [ops.expand_dims(padding, 1)]
    if attention_mask is not None:
        masks.append(attention_mask)
    if causal:
        masks.append(
            ops.expand_dims(causal_mask(query_length, key_length, query_start), 0)
        )
    merged = masks[0]
    for mask in masks[1:]:
        merged = ops.logical_and(merged, mask)
    batch_size = ops.shape(merged)[0]
    merged = ops.broadcast_to(merged, (batch_size, query_length, key_length))
    return dict(attention_mask=merged, value_mask=None, use_causal_mask=False)


def dense(units, activation, kernel_initializer, bias_initializer, dtype, name):
    return keras.layers.Dense(
        units,
        activation=activation,
        kernel_initializer=clone_initializer(kernel_initializer),
        bias_initializer=clone_initializer(bias_initializer),
        dtype=dtype,
        name=name,
    )
