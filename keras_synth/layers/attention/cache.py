"""The decoding cache of `SynthesizerAttention`, and position checks.

Two layouts, both `(B, slots, length, H, head_dim)`:

- values only, `(B, 1, length, H, value_dim)`, for pure synthesizers: their
  logits need no keys, so the cache is half the size of a key/value cache;
- keys and values, `(B, 2, length, H, key_dim)`, for variants with a
  dot-product part (keras-hub's layout; it needs `key_dim == value_dim`).

A decoding step writes its new projected keys/values at
`cache_update_index`. With a causal mask it reads only the cache rows up to
its last query position (`read_prefix`): exactly those rows where the index
has a value (eager), else whole blocks of `CACHE_BLOCK` rows up to the
block that holds it (a `switch` over the blocks: XLA needs static shapes),
so that a step at position `i` reads about `i` rows, not the whole cache,
and its logits are `(H, T, i)`, never `T x S`. Otherwise (no causal mask, an
`attention_mask`) it attends over the whole cache. Query rows sit at
positions `query_start + i` of the synthesized `max_length x max_length`
logits; positions past `max_length` (or writes past the cache's end) raise
a `ValueError` when the index is known (a Python int or an eager tensor).
Under a compiler (jax.jit, tf.function) the index is a traced value and no
backend-neutral op can raise; the layer's outputs are then NaN
(`positions_in_range` gives the flag), never a silently clamped answer.
The cache cannot be left as it was either: the compilers clamp the write
(`dynamic_update_slice`) into the cache's last rows, so the rows written
there are NaN too (`update_cache`'s `in_range`), and any later step that
reads them reports it. The other rows are kept; marking the whole cache
would copy it at every compiled step.
"""

import math

import keras
from keras import ops

from keras_synth.layers.graph_checks import graph_check
from keras_synth.layers.keras_utils import concrete_bool
from keras_synth.layers.keras_utils import is_int
from keras_synth.layers.keras_utils import export_format

# Cache rows per block of a causal decoding step under a compiler.
CACHE_BLOCK = 256


def cache_shape(batch_size, length, num_heads, key_dim, value_dim,
                uses_keys):
    """The shape `initial_cache` returns (see the module docstring)."""
    if uses_keys:
        if key_dim != value_dim:
            raise ValueError(
                "A cache with keys needs key_dim == value_dim. Received: "
                f"key_dim={key_dim}, value_dim={value_dim}"
            )
        return (batch_size, 2, length, num_heads, key_dim)
    return (batch_size, 1, length, num_heads, value_dim)


def cache_length(length, max_length):
    """The length of a new cache: `length`, by default the layer's
    `max_length`, never more than it."""
    if length is None:
        length = max_length
    if length is None:
        raise ValueError(
            "Argument `max_length` is required by `initial_cache` for a "
            "layer built without `max_length`. Received: max_length=None"
        )
    if max_length is not None and is_int(length) and length > max_length:
        raise ValueError(
            f"Argument `max_length`={length} of `initial_cache` "
            f"exceeds the layer's max_length={max_length}."
        )
    return length


def check_cache(cache, num_heads, key_dim, value_dim, uses_keys, variant):
    """Raises unless `cache`'s static shape fits the layer's layout."""
    slots = 2 if uses_keys else 1
    head_dim = key_dim if uses_keys else value_dim
    shape = tuple(cache.shape)
    expected = (slots, None, num_heads, head_dim)
    if len(shape) != 5 or any(
        e is not None and s is not None and s != e
        for s, e in zip(shape[1:], expected)
    ):
        raise ValueError(
            f"Argument `cache` has the wrong shape for this {variant!r} "
            f"layer. Expected (batch, {slots}, length, {num_heads}, "
            f"{head_dim}) as returned by `initial_cache`. Received: "
            f"cache.shape={shape}"
        )


def update_cache(cache, cache_update_index, new_values, new_keys=None,
                 in_range=None):
    """Writes `new_values` (and `new_keys`) `(B, T, H, k)` into `cache` at
    `cache_update_index`; returns `(keys, values, cache)`, keys `None` for
    a values-only cache. `None` as the index uses the cache as it is.

    `in_range` is `positions_in_range`'s flag for a traced index (`None`
    when everything is known to fit): where it is False the rows written
    are NaN, not the new keys and values (see the module docstring).

    The new rows of every slot are written into the 5-D cache in one
    `slice_update`, which a compiler runs in place; the keys and values
    are then read from it. (Slicing the slots out, writing each and
    stacking them again copied the whole cache at every compiled step, as
    did XLA's layout change of a values-only cache's size-1 slot axis.)
    """
    if cache_update_index is None:
        return _keys(cache), cache[:, -1, ...], cache
    new_values = nan_unless(in_range, new_values)
    if new_keys is not None:
        new_keys = nan_unless(in_range, new_keys)
    if keras.backend.backend() == "tensorflow" and export_format() == "onnx":
        # TensorFlow's `slice_update` is XLA's DynamicUpdateSlice, which
        # ONNX (tf2onnx) has no operator for; a scatter of the same rows
        # is ONNX's ScatterND. Only there: XLA runs the slice in place, and
        # LiteRT has DynamicUpdateSlice but no scatter of its own.
        values = _scatter_rows(cache[:, -1, ...], new_values,
                               cache_update_index)
        if new_keys is None:
            return None, values, ops.expand_dims(values, 1)
        keys = _scatter_rows(cache[:, 0, ...], new_keys, cache_update_index)
        return keys, values, ops.stack((keys, values), axis=1)
    if new_keys is None:
        update = ops.expand_dims(new_values, 1)
    else:
        update = ops.stack((new_keys, new_values), axis=1)
    start = [0, 0, cache_update_index, 0, 0]
    if keras.backend.backend() == "torch" and not is_int(cache_update_index):
        # PyTorch's ONNX exporter writes the update as a ScatterND of the
        # start's dtype (ONNX requires int64) and stacks the start as it is
        # given (ONNX's Concat requires one dtype): one int64 tensor.
        zero = ops.zeros((), "int64")
        start = ops.stack(
            [zero, zero, ops.cast(cache_update_index, "int64"), zero, zero])
    cache = ops.slice_update(cache, start, update)
    return _keys(cache), cache[:, -1, ...], cache


def _keys(cache):
    """The keys of a key/value cache, `None` for a values-only one."""
    return cache[:, 0, ...] if cache.shape[1] == 2 else None


def read_rows(cache, rows):
    """`(keys, values)` of the first `rows` positions, `(B, rows, H, k)`,
    sliced from the 5-D cache (keys `None` for a values-only cache).

    A decoding step reads its prefix with this inside `read_prefix`'s
    branches: the branches then take the cache `update_cache` wrote, the
    same tensor the step returns, so a compiler writes it in place. (With
    the keys and values sliced out before the branches, XLA computed the
    write twice, once per consumer, copying the whole cache for each.)
    """
    keys = cache[:, 0, :rows] if cache.shape[1] == 2 else None
    return keys, cache[:, -1, :rows]


def _scatter_rows(cache, updates, start):
    """`cache (B, S, ...)` with rows `start ... start + T - 1` of every
    example replaced by `updates (B, T, ...)`, as one `ops.scatter_update`."""
    batch_size, length = ops.shape(updates)[0], ops.shape(updates)[1]
    examples = ops.repeat(ops.arange(0, batch_size, dtype="int32"), length)
    rows = ops.tile(ops.arange(0, length, dtype="int32")
                    + ops.cast(start, "int32"), [batch_size])
    indices = ops.stack([examples, rows], axis=1)
    flat = ops.reshape(updates, (-1,) + tuple(updates.shape[2:]))
    return ops.scatter_update(cache, indices, flat)


def check_lengths(query_length, key_length, max_length, variant):
    """Raises if a known query or key length exceeds `max_length`.

    Returns the run-time checks (`keras_utils.graph_check`) of lengths
    known only when a TensorFlow graph runs (`tf.function` with a `None`
    length), which raise the same message then; an empty list otherwise.
    """
    if max_length is None:
        return []
    checks = []
    for arg, length in (("query", query_length), ("key/value", key_length)):
        message = (
            f"The {arg} sequence length {{}} exceeds "
            f"max_length={max_length} of this {variant!r} "
            "SynthesizerAttention layer. Expected a length <= "
            "max_length; build the layer with a larger `max_length` "
            "or pass shorter sequences."
        )
        if is_int(length):
            if length > max_length:
                raise ValueError(message.format(length))
            continue
        # TensorFlow shortens a long run-time message in its middle: the
        # lengths come first.
        checks.append(graph_check(
            ops.less_equal(length, max_length),
            f"The {arg} sequence length {{}} exceeds "
            f"max_length={max_length}. This {variant!r} "
            "SynthesizerAttention layer expects a length <= max_length; "
            "build it with a larger `max_length` or pass shorter "
            "sequences.",
            length,
        ))
    return [c for c in checks if c is not None]


def positions_in_range(query_start, query_length, max_length,
                       cache_update_index=None, update_length=None,
                       cache_length=None):
    """Checks that query positions and a cache write fit; returns a flag.

    Raises a `ValueError` for anything out of range whose value is known
    (Python ints, eager tensors). Returns `None` when everything is known
    to fit, else a boolean scalar tensor (a traced index): `False` when
    the query rows pass `max_length` or the write passes the cache's end.
    """
    checks = []
    if max_length is not None:
        checks.append((
            (query_start, query_length, max_length),
            lambda: _query_message(query_start, query_length, max_length),
        ))
    if cache_update_index is not None:
        checks.append((
            (cache_update_index, update_length, cache_length),
            lambda: (
                f"Argument `cache_update_index`={_value(cache_update_index)} "
                f"writes {update_length} position(s) into a cache of length "
                f"{cache_length}. Expected 0 <= cache_update_index <= "
                f"{cache_length} - {update_length}."
            ),
        ))
    flag = None
    for (start, length, limit), message in checks:
        if all(is_int(x) for x in (start, length, limit)):
            if start < 0 or start + length > limit:
                raise ValueError(message())
            continue
        ok = ops.logical_and(
            ops.greater_equal(start, 0),
            ops.less_equal(start + length, limit),
        )
        known = concrete_bool(ok)
        if known is False:
            raise ValueError(message())
        if known is None:
            flag = ok if flag is None else ops.logical_and(flag, ok)
    return flag


def _value(x):
    if is_int(x):
        return x
    try:
        return int(ops.convert_to_numpy(x))
    except Exception:
        return x


def _query_message(query_start, query_length, max_length):
    start = _value(query_start)
    return (
        f"Query positions {start}...{start + query_length - 1} exceed "
        f"max_length={max_length}. Expected query_start_index + query "
        "length <= max_length."
    )


def nan_unless(flag, output):
    """`output` where the boolean scalar `flag` holds, NaN elsewhere."""
    if flag is None:
        return output
    nan = ops.convert_to_tensor(float("nan"), dtype=output.dtype)
    return ops.where(flag, output, nan)


def read_prefix(end, cache_length, attend, block=None):
    """Runs `attend(n)` on the first `n >= end` rows of a cache.

    Causal decoding: query rows before position `end` see no cache row at
    or past `end`, so attention over the first `n` rows equals attention
    over the whole cache.

    Args:
        end: one past the last query position; an int or a scalar tensor.
        cache_length: the cache's static length.
        attend: a function of a static row count `n`, returning the
            attention over rows `0 ... n - 1`.
        block: rows per block where `end` has no value (traced); defaults
            to `CACHE_BLOCK`.

    Returns:
        `attend(n)` for `n = end` (a known `end`) or the smallest multiple
        of `block` at or above it (capped at `cache_length`).
    """
    block = CACHE_BLOCK if block is None else block
    known = _value(end)
    if is_int(known):
        return attend(max(1, min(cache_length, known)))
    blocks = math.ceil(cache_length / block)
    if blocks <= 1:
        return attend(cache_length)
    index = ops.clip((end - 1) // block, 0, blocks - 1)
    branches = [
        (lambda n: lambda: attend(n))(min(cache_length, (i + 1) * block))
        for i in range(blocks)
    ]
    return ops.switch(index, branches)
