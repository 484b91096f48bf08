"""Query-blocked batch-shared attention: long inputs without `H x T x S` tensors.

The batch-shared path (`shared_attention`) keeps one `(H, T, S)` tensor of
logits and one of probabilities for the whole batch. At long lengths these
set the memory of a training step: at `T = S = 16,384` and 4 heads, each is
4 GiB in float32. Here the queries are cut into blocks of `block` rows; each
block computes its `(H, block, S)` logits, finishes its softmax and its
product with the values, and is rematerialised in the backward pass
(`keras.remat`): only the block's inputs are kept for the gradient, never
its logits or probabilities. The result equals the unblocked path's
(values and gradients), masks included.

The logits of a block come from the components' factors (`left (H, T, c)`,
`right (H, c, S)`, small for factorized random) or from their `(H, T, S)`
logits (random, fixed random: a slice of the `(H, ℓ, ℓ)` parameter), sliced
inside the block. The blocks run one after the other (`ops.map`), so the
gradient of the sliced tensors accumulates in one buffer. Random stays
bound by its parameter: `H x ℓ x ℓ`, its gradient and Adam's two slots.
"""

import keras
from keras import ops

from keras_synth.layers.keras_utils import is_int
from keras_synth.layers.attention.shared import shared_attention

# Rows of queries per block. Inputs of up to twice this length attend in
# one piece (the blocks only pay off where `H x T x S` tensors are large).
QUERY_BLOCK = 1024


def query_block_size(query_length, block=None):
    """The query block for `query_length` rows, or `None` for one piece.

    Args:
        query_length: `T`; blocks need a static (Python int) length.
        block: rows per block; defaults to `QUERY_BLOCK`.
    """
    block = QUERY_BLOCK if block is None else block
    if not is_int(block) or block < 1:
        raise ValueError(
            f"Argument `block` must be a positive int. Received: block={block}"
        )
    if not is_int(query_length) or query_length <= 2 * block:
        return None
    return block


def blocked_shared_attention(synthesizers, weights, query_start, query_length,
                             values, rows=None, keys=None, pattern=None,
                             block=QUERY_BLOCK):
    """Batch-shared attention, `block` query rows at a time.

    Args:
        synthesizers: batch-independent `Synthesizer` layers (built).
        weights: `(H, N)` mixture weights, `None` for one component.
        query_start: position of the first query row.
        query_length: `T`, a Python int.
        values: projected values `(B, S, H, value_dim)`.
        rows, keys: the factored query and key masks (`shared_attention`).
        pattern: a function of `(start, length)` (`start` maybe a scalar
            tensor) returning the boolean batch-independent mask
            `(length, S)` of those query rows, or `None`; `None` for none.
        block: query rows per block.

    Returns:
        `attention_output (B, T, H, value_dim)`, equal to
        `shared_attention` of the whole logits.
    """
    if any(s.batch_dependent for s in synthesizers):
        raise ValueError(
            "Query blocks need batch-independent synthesizers. Received: "
            f"{[s.variant for s in synthesizers]}"
        )
    key_length = ops.shape(values)[1]
    lefts, rights, plain = [], [], None
    for i, synthesizer in enumerate(synthesizers):
        scale = None if weights is None else weights[:, i]
        args = (None, None, query_start, query_length, key_length)
        if synthesizer.bilinear:
            left, right = synthesizer.scaled_factors(*args, scale=scale)
            lefts.append(left)
            rights.append(right)
        else:
            logits = synthesizer.scaled_logits(*args, scale=scale)
            plain = logits if plain is None else plain + logits
    tensors = []
    if lefts:
        tensors = [ops.concatenate(lefts, -1), ops.concatenate(rights, -2)]
    if plain is not None:
        tensors.append(plain)
    attend = _block(block, bool(lefts), plain is not None, rows, keys, pattern)
    count = query_length // block
    # The whole blocks one after the other (a scan on JAX, a while loop on
    # TensorFlow, a loop on PyTorch): one block's logits live at a time,
    # forward and backward; unrolled, XLA would schedule them together.
    outputs = ops.map(
        lambda start: attend(start)(values, *tensors),
        ops.arange(0, count * block, block, dtype="int32"),
    )  # (count, B, block, H, value_dim)
    batch, _, heads, value_dim = ops.shape(values)
    outputs = ops.reshape(
        ops.transpose(outputs, (1, 0, 2, 3, 4)),
        (batch, count * block, heads, value_dim),
    )
    rest = query_length - count * block
    if rest:
        last = _block(rest, bool(lefts), plain is not None, rows, keys,
                      pattern)
        outputs = ops.concatenate(
            [outputs, last(count * block)(values, *tensors)], axis=1
        )
    return outputs


def _block(length, has_factors, has_plain, rows, keys, pattern):
    """For a start row, the rematerialised attention of query rows `start
    ... start + length - 1` as a function of the values and the logits'
    factors or whole logits (the tensors that need a gradient); the masks
    and the start (no gradient) are closed over."""

    def at(start):
        @keras.remat
        def attend(values, *tensors):
            logits = None
            if has_factors:
                left, right = tensors[0], tensors[1]
                heads, _, width = ops.shape(left)
                left = ops.slice(left, (0, start, 0), (heads, length, width))
                logits = ops.einsum("ntc,ncs->nts", left, right)
            if has_plain:
                plain = tensors[-1]
                heads, _, key_length = ops.shape(plain)
                piece = ops.slice(plain, (0, start, 0),
                                  (heads, length, key_length))
                logits = piece if logits is None else logits + piece
            block_rows = None
            if rows is not None:
                block_rows = ops.slice(
                    rows, (0, start), (ops.shape(rows)[0], length))
            return shared_attention(
                logits,
                values,
                block_rows,
                keys,
                None if pattern is None else pattern(start, length),
            )

        return attend

    return at
