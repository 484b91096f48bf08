"""Helpers shared by the generative tasks (causal LM and seq2seq LM).

Private module: the embedding of token ids at a position offset, the
decoder caches of a stack of `SynthesizerDecoder` blocks and a cached pass
through it, the check of the generation length, the padding mask after
stop tokens, and `compile` with keras-synth's samplers.
"""

import math

import keras
from keras import ops

from keras_synth import samplers
from keras_synth._hub import keras_hub


def positions(position_embedding, x, start_index=0):
    """keras-hub's `PositionEmbedding` of `x` (`(B, T, D)`) from
    `start_index` on: the layer's slice of its table, except for a tensor
    `start_index` on PyTorch (cached decoding), which gathers the same rows
    `start_index + arange(T)`: `torch.export` (Keras's ONNX and LiteRT
    exports) cannot bound the size of a slice that starts at a tensor."""
    if isinstance(start_index, int) or keras.backend.backend() != "torch":
        return position_embedding(x, start_index=start_index)
    table = ops.convert_to_tensor(position_embedding.position_embeddings)
    rows = ops.cast(start_index, "int32") + ops.arange(
        0, ops.shape(x)[1], dtype="int32")
    return ops.broadcast_to(
        ops.cast(ops.take(table, rows, axis=0), x.dtype), ops.shape(x))


def embed(token_embedding, position_embedding, token_ids, scale, start_index=0):
    """Token embeddings (times `sqrt(hidden_dim)` with `scale`) + positions."""
    x = token_embedding(token_ids)
    if scale:
        x = x * ops.cast(math.sqrt(token_embedding.output_dim), x.dtype)
    return x + positions(position_embedding, x, start_index)


def initial_self_attention_caches(blocks, batch_size, length, dtype):
    """One empty self-attention cache per block (layouts may differ)."""
    return tuple(
        block.initial_cache(batch_size, length, dtype=dtype) for block in blocks
    )


def initial_cross_attention_caches(blocks, batch_size, length, dtype):
    """One empty cross-attention cache per block for `length` source keys."""
    return tuple(
        block.initial_cross_attention_cache(batch_size, length, dtype=dtype)
        for block in blocks
    )


def decode_with_caches(
    blocks,
    x,
    self_attention_caches,
    cache_update_index,
    encoder_sequence=None,
    cross_attention_caches=None,
    fill_cross_attention_caches=False,
    **kwargs,
):
    """Runs `x` through a stack of `SynthesizerDecoder` blocks with caches.

    Args:
        blocks: the decoder blocks.
        x: `(batch, length, hidden_dim)` embeddings of the tokens at
            `cache_update_index ...`.
        self_attention_caches: one self-attention cache per block.
        cache_update_index: int or int tensor, the position of `x[:, 0]`.
        encoder_sequence: the encoder output, `None` for decoder-only
            stacks.
        cross_attention_caches: one cross-attention cache per block (with
            `encoder_sequence`).
        fill_cross_attention_caches: fill the cross-attention caches from
            `encoder_sequence` (first step) or reuse them.
        **kwargs: further call arguments of every block (masks,
            `training`).

    Returns:
        `(x, self_attention_caches)` for a decoder-only stack, `(x,
        self_attention_caches, cross_attention_caches)` with
        `encoder_sequence`; the caches as tuples.
    """
    new_self, new_cross = [], []
    if encoder_sequence is None:
        for block, self_cache in zip(blocks, self_attention_caches):
            x, self_cache = block(
                x,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=cache_update_index,
                **kwargs,
            )
            new_self.append(self_cache)
        return x, tuple(new_self)
    for block, self_cache, cross_cache in zip(
        blocks, self_attention_caches, cross_attention_caches
    ):
        x, self_cache, cross_cache = block(
            x,
            encoder_sequence,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=cache_update_index,
            cross_attention_cache=cross_cache,
            cross_attention_cache_update_index=(
                0 if fill_cross_attention_caches else None
            ),
            **kwargs,
        )
        new_self.append(self_cache)
        new_cross.append(cross_cache)
    return x, tuple(new_self), tuple(new_cross)


def check_generate_length(length, limit, what="max_length"):
    """Raises a clear error for sequences longer than the backbone's."""
    if length is not None and limit is not None and length > limit:
        raise ValueError(
            f"Argument `{what}`={length} is beyond the backbone's "
            f"max_sequence_length={limit}: the position embeddings (and the "
            "synthesizers' logits) cover at most that many tokens. Pass "
            f"`{what}` <= {limit}."
        )


def padding_after_stop(token_ids, padding_mask, stop_token_ids):
    """The padding mask of generated sequences, as keras-hub's tasks build it.

    True up to and including the first stop token generated after the
    prompt (`padding_mask` marks the prompt), False after it; all True
    without stop tokens.
    """
    if stop_token_ids is None:
        return ops.ones_like(token_ids, dtype="bool")
    generated = ops.logical_not(ops.cast(padding_mask, "bool"))
    is_stop = ops.zeros_like(token_ids, dtype="bool")
    for stop in stop_token_ids:
        is_stop = ops.logical_or(is_stop, ops.equal(token_ids, stop))
    end = ops.cast(ops.logical_and(is_stop, generated), "int32")
    overflow = ops.cumsum(end, axis=-1) - end
    return ops.equal(overflow, 0)


class SamplerCompileMixin:
    """`compile(sampler=...)` that also takes keras-synth's samplers.

    The sampler defaults to `"greedy"`; names and instances of every
    keras-hub sampler work, and `"length_penalty_beam"` or a
    `keras_synth.samplers.LengthPenaltyBeamSampler`.
    """

    def compile(self, optimizer="auto", loss="auto", *, weighted_metrics="auto",
                sampler="greedy", **kwargs):
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            sampler=None,
            **kwargs,
        )
        self.sampler = samplers.get(sampler)
        self.generate_function = None

    def generate(self, inputs, max_length=None, stop_token_ids="auto",
                 strip_prompt=False):
        limit = self.backbone.max_sequence_length
        check_generate_length(max_length, limit)
        if max_length is None and self.preprocessor is not None:
            check_generate_length(
                self.preprocessor.sequence_length, limit,
                "preprocessor.sequence_length",
            )
        if getattr(self, "sampler", None) is None:
            # Not compiled: keras-hub's tasks then have no sampler at all.
            self.sampler = samplers.get("greedy")
        return super().generate(
            inputs,
            max_length=max_length,
            stop_token_ids=stop_token_ids,
            strip_prompt=strip_prompt,
        )


def reversible_embedding(vocabulary_size, hidden_dim, dtype, name):
    """The token embedding, tied to the output projection."""
    return keras_hub.layers.ReversibleEmbedding(
        input_dim=vocabulary_size,
        output_dim=hidden_dim,
        tie_weights=True,
        embeddings_initializer=keras.initializers.RandomNormal(
            stddev=hidden_dim**-0.5
        ),
        dtype=dtype,
        name=name,
    )
