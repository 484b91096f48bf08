"""The cached-decoding methods of `SynthesizerAttention`.

`CachedDecodingMixin` holds what the layer does with a decoding cache:
`initial_cache`, projecting new keys and values into the cache, and the
checks of positions and lengths done before it is written. The cache's
layouts and the functions on it live in `cache` (`attention_cache`).

The mixin reads the layer's `_num_heads`, `_key_dim`, `_value_dim`,
`_max_length`, `_synthesizer`, `_synthesizers`, `_value_dense` and
`uses_keys`; it is a part of `SynthesizerAttention`, not a layer of its own.
"""

from keras import ops

from keras_synth.layers.attention import cache as attention_cache


class CachedDecodingMixin:
    """Cache creation, cache writes and position checks of the layer."""

    def _project_keys_and_values(self, key, value, cache, cache_update_index,
                                 in_range=None):
        """Returns `(keys, values, cache)`, keys `None` for pure synthesizers;
        the rows written are NaN where the traced flag `in_range` is False
        (`attention_cache.update_cache`)."""
        if cache is None:
            if cache_update_index is not None:
                raise ValueError(
                    "`cache_update_index` should not be set if `cache` is "
                    f"`None`. Received: cache_update_index={cache_update_index}"
                )
            keys = self._project_key(key) if self.uses_keys else None
            return keys, self._value_dense(value), None
        if cache_update_index is None:
            return attention_cache.update_cache(cache, None, None)
        new_keys = self._project_key(key) if self.uses_keys else None
        return attention_cache.update_cache(
            cache, cache_update_index, self._value_dense(value), new_keys,
            in_range,
        )

    def _project_key(self, key):
        for synthesizer in self._synthesizers:
            if synthesizer.uses_keys:
                return synthesizer.project_key(key)
        return None

    def _check_positions(self, query_start, query_length, value_length,
                         cache, cache_update_index):
        """Raises for known lengths or positions out of range; returns the
        traced in-range flag (`attention_cache.positions_in_range`) and the
        run-time length checks of a TensorFlow graph
        (`attention_cache.check_lengths`)."""
        if cache is not None:
            attention_cache.check_cache(
                cache, self._num_heads, self._key_dim, self._value_dim,
                self.uses_keys, self._synthesizer,
            )
        key_length = value_length if cache is None else ops.shape(cache)[2]
        checks = attention_cache.check_lengths(
            query_length, key_length, self._max_length, self._synthesizer
        )
        if cache is None:
            cache_update_index = None  # `_project_keys_and_values` raises
        return attention_cache.positions_in_range(
            query_start, query_length, self._max_length,
            cache_update_index, value_length, key_length,
        ), checks

    def initial_cache(self, batch_size, max_length=None, dtype=None):
        """Returns an empty (zero) cache for autoregressive decoding.

        Pure synthesizers need no keys: their cache holds values only,
        `(batch_size, 1, max_length, H, value_dim)`, half the memory of a
        key/value cache. Variants with a dot-product part keep keys too:
        `(batch_size, 2, max_length, H, key_dim)` (this needs
        `key_dim == value_dim`, as keras-hub's caches do).

        Args:
            batch_size: Batch size.
            max_length: Cache length; defaults to the layer's `max_length`.
            dtype: Defaults to the layer's compute dtype.
        """
        max_length = attention_cache.cache_length(max_length, self._max_length)
        shape = attention_cache.cache_shape(
            batch_size, max_length, self._num_heads, self._key_dim,
            self._value_dim, self.uses_keys,
        )
        return ops.zeros(shape, dtype=dtype or self.compute_dtype)
