"""Mixtures of synthesizers: per-head weights and one sum of logits.

A mixture such as `"random+vanilla"` adds its components' logits with
learned per-head weights `softmax(w_h)` `(H, N)`. Each component applies its
weight to its own smallest tensor (a kernel, a factor), so the mixture only
adds logits and never rescales a `B x H x T x S` tensor. Components whose
logits are a product `left @ right` (`Synthesizer.factors`: vanilla, dense,
factorized random) concatenate their factors and are contracted once: one
`B x H x T x S` product instead of one per component plus their sum.
"""

from keras import ops

from keras_synth.layers.synthesizers.base import to_batch


def batch_size_of(tensors):
    """The batch size of the first `(B, H, ., .)` tensor; `None` if all are
    batch-independent `(H, ., .)`."""
    for tensor in tensors:
        if len(tensor.shape) == 4:
            return ops.shape(tensor)[0]
    return None


def mixed_logits(synthesizers, weights, args, fast_paths=True):
    """The logits of `synthesizers`, mixed with per-head `weights`.

    Args:
        synthesizers: the component `Synthesizer` layers.
        weights: `(H, N)` normalised mixture weights, `None` for one
            component.
        args: `(query, keys, query_start, query_length, key_length)`, as
            `Synthesizer.logits` takes them.
        fast_paths: with `True`, bilinear components share one contraction
            and batch-independent logits join batch-dependent ones as a
            matrix product (`broadcast_to_batch`); `False` sums each
            component's own logits, the plain reference computation.

    Returns:
        `(B, H, T, S)` logits, or `(H, T, S)` if no component depends on
        the input.
    """
    if len(synthesizers) == 1:
        return synthesizers[0].logits(*args)
    fuse = fast_paths and sum(s.bilinear for s in synthesizers) > 1
    terms, factors = [], []
    for i, synthesizer in enumerate(synthesizers):
        if fuse and synthesizer.bilinear:
            factors.append(
                synthesizer.scaled_factors(*args, scale=weights[:, i]))
        else:
            terms.append(
                synthesizer.scaled_logits(*args, scale=weights[:, i]))
    if factors:
        terms.append(contract_factors(factors))
    batch_size = batch_size_of(terms)
    mixed = None
    for term in terms:
        if batch_size is not None and len(term.shape) == 3:
            term = broadcast_to_batch(term, batch_size, fast_paths)
        mixed = term if mixed is None else mixed + term
    return mixed


def broadcast_to_batch(logits, batch_size, fast_paths=True):
    """`(H, T, S)` logits repeated `(B, H, T, S)` for a sum with
    batch-dependent ones.

    With `fast_paths`, as the product `ones (B, 1) @ logits (1, H*T*S)`: its
    gradient is a matrix product too, where a broadcast's is a reduction
    over the batch axis, which XLA's CPU backend runs several times slower.
    Without, the logits are returned as they are (the sum broadcasts).
    """
    if not fast_paths:
        return logits
    shape = tuple(ops.shape(logits))
    ones = ops.ones((batch_size, 1), dtype=logits.dtype)
    # (`ops.einsum`, not `ops.matmul`: Keras' PyTorch `matmul` returns
    # float32 for float64 inputs.)
    product = ops.einsum("bo,on->bn", ones, ops.reshape(logits, (1, -1)))
    return ops.reshape(product, (batch_size,) + shape)


def contract_factors(factors):
    """`sum_i left_i @ right_i` as one product of the concatenated factors;
    `(B, H, T, S)` if any factor has a batch axis, else `(H, T, S)`."""
    batch_size = batch_size_of([f for pair in factors for f in pair])
    if batch_size is None:
        left = ops.concatenate([p[0] for p in factors], axis=-1)
        right = ops.concatenate([p[1] for p in factors], axis=-2)
        return ops.einsum("ntc,ncs->nts", left, right)

    left = ops.concatenate([to_batch(p[0], batch_size) for p in factors], -1)
    right = ops.concatenate([to_batch(p[1], batch_size) for p in factors], -2)
    # Batched over (b, n): the product comes out as (B, H, T, S).
    return ops.einsum("bntc,bncs->bnts", left, right)
