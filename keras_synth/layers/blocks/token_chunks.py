"""Per-token work over chunks of tokens, rematerialised: long inputs in less memory.

A block's feedforward sublayer (and the residual step before it) treats
every token alone, yet its backward pass keeps about a dozen
`(batch, length, width)` tensors (normalizations, the `intermediate_dim`
activations, residuals) alive at once; at long lengths these, not the
attention, set a training step's memory. `map_token_chunks` runs such a
function over chunks of `chunk_size` tokens of the batch and length
flattened together (a reshape, no copy), one chunk after the other
(`ops.map`), each rematerialised (`keras.remat`): the backward pass keeps
the chunks' inputs and recomputes one chunk's intermediates at a time.
The result equals the function applied to the whole tensors (values and
gradients).
"""

import keras
from keras import ops

from keras_synth.layers.keras_utils import is_int


def check_chunk_size(chunk_size, name="feedforward_chunk_size"):
    """Raises unless `chunk_size` is `None` or a positive Python int."""
    if chunk_size is not None and (not is_int(chunk_size) or chunk_size < 1):
        raise ValueError(
            f"Argument `{name}` must be a positive int or None. "
            f"Received: {name}={chunk_size!r}"
        )


def map_token_chunks(function, chunk_size, *tensors, variables=(),
                     seed_generators=()):
    """`function(*tensors)` computed `chunk_size` tokens at a time.

    Args:
        function: a per-token function of tensors `(B, T, ...)` returning
            one `(B, T, ...)` tensor (no mixing across tokens).
        chunk_size: tokens (batch x length) per chunk, or `None` for one
            piece.
        *tensors: `(B, T, ...)` tensors with the same `B` and `T`.
        variables: the Keras variables `function` reads. Each chunk gets
            their values as inputs (a `keras.StatelessScope` maps them):
            TensorFlow cannot differentiate a rematerialised loop body
            that reads variables itself.
        seed_generators: the `keras.random.SeedGenerator`s `function`
            draws from (its dropout layers'). Chunk `i` sees each one's
            state plus `[i + 1, 0]`, a stream of its own that the
            backward pass's recomputation draws again (the same dropout
            masks); the generators advance once per call, outside the
            chunks (a state cannot change inside the loop). (PyTorch's
            dropout of an unseeded layer draws from the global generator
            instead, whose state `keras.remat`'s checkpoint restores for
            the recomputation.)

    Returns:
        `function(*tensors)`. Chunks run when `B x T` is larger than
        `chunk_size`; the `B x T mod chunk_size` last tokens form one
        smaller chunk. A batch or length known only at run time (a
        TensorFlow graph traced for any batch size) gives a loop of as
        many chunks as the run's tokens fill, and a last chunk that may be
        empty.
    """
    batch, length = tensors[0].shape[0], tensors[0].shape[1]
    static = is_int(batch) and is_int(length)
    if chunk_size is None or (static and batch * length <= chunk_size):
        return function(*tensors)
    if not static:
        shape = ops.shape(tensors[0])
        batch, length = shape[0], shape[1]
    tokens = batch * length
    count = tokens // chunk_size
    whole = count * chunk_size

    def rows(tensor, start, stop, size):
        """Tokens `start ... stop - 1` as chunks `(pieces, 1, size, ...)`
        (a reshape of the flattened tokens)."""
        tail = tuple(tensor.shape[2:])
        flat = ops.reshape(tensor, (-1,) + tail)[start:stop]
        return ops.reshape(flat, (-1, 1, size) + tail)

    variables = list(variables)
    values = [v.value for v in variables]
    states = [g.state for g in seed_generators]
    seeds = [s.value for s in states]
    for generator in seed_generators:
        generator.next()  # the next call's masks differ

    @keras.remat
    def rematerialised(pieces, index, values, seeds):
        offset = ops.stack([index + 1, ops.zeros_like(index)])
        mapping = list(zip(variables, values)) + [
            (state, seed + ops.cast(offset, seed.dtype))
            for state, seed in zip(states, seeds)]
        with keras.StatelessScope(state_mapping=mapping):
            return function(*pieces)

    def chunk(elements):
        *pieces, index = elements
        return rematerialised(pieces, index, values, seeds)

    outputs = ops.map(
        chunk, [rows(t, 0, whole, chunk_size) for t in tensors]
        + [ops.arange(count, dtype="int32")],
    )  # (count, 1, chunk_size, ...)
    outputs = ops.reshape(outputs, (-1,) + tuple(outputs.shape[3:]))
    if not static or tokens > whole:
        last = chunk([rows(t, whole, tokens, tokens - whole)[0]
                      for t in tensors]
                     + [ops.cast(count, "int32")])
        outputs = ops.concatenate(
            [outputs, ops.reshape(last, (-1,) + tuple(last.shape[2:]))], 0)
    return ops.reshape(outputs, (batch, length) + tuple(outputs.shape[1:]))
