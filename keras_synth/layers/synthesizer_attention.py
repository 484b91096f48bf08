"""`SynthesizerAttention`: synthesized attention as a Keras 3 layer."""

import math

import keras
from keras import ops

from keras_synth.layers import synthesizers as synth_lib
from keras_synth.layers.synthesizers import _is_int

try:  # Keras keeps tensors' masks in a private helper (MHA uses it too).
    from keras.src.backend import get_keras_mask as _get_keras_mask
    from keras.src.backend import set_keras_mask as _set_keras_mask
except ImportError:  # pragma: no cover - older or newer Keras layouts

    def _get_keras_mask(x):
        return getattr(x, "_keras_mask", None)

    def _set_keras_mask(x, mask):
        try:
            x._keras_mask = mask
        except AttributeError:
            pass


# The lowest finite value of each float dtype, for masked logits.
_LOWEST = {
    "float16": -65504.0,
    "bfloat16": -3.3895313892515355e38,
    "float32": -3.4028234663852886e38,
    "float64": -1.7976931348623157e308,
}


def parse_synthesizer(synthesizer):
    """Returns the canonical tuple of variant names of `synthesizer`.

    Accepts a name (`"random"`), a mixture written with `+`
    (`"random+vanilla"`) or a list/tuple of names. Raises `ValueError` for an
    unknown name, an empty mixture or a duplicate.
    """
    if isinstance(synthesizer, str):
        names = [name.strip() for name in synthesizer.split("+")]
    elif isinstance(synthesizer, (list, tuple)):
        names = list(synthesizer)
    else:
        raise ValueError(
            "Received an invalid value for argument `synthesizer`, expected a "
            "variant name, a mixture such as 'random+vanilla', or a list of "
            f"names. Received: synthesizer={synthesizer!r}"
        )
    if not names:
        raise ValueError(
            "Argument `synthesizer` names no variant. Expected one or more of "
            f"{synth_lib.VARIANTS}. Received: synthesizer={synthesizer!r}"
        )
    for name in names:
        if name not in synth_lib.SYNTHESIZERS:
            import difflib

            close = difflib.get_close_matches(
                str(name), list(synth_lib.SYNTHESIZERS), n=1)
            raise ValueError(
                f"Unknown variant {name!r} in argument `synthesizer`. "
                f"Expected one of {synth_lib.VARIANTS} or a mixture of them "
                f"joined with '+'. Received: synthesizer={synthesizer!r}"
                + (f". Did you mean {close[0]!r}?" if close else "")
            )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(
            f"Argument `synthesizer` names {duplicates} more than once; each "
            "variant may appear once in a mixture. "
            f"Received: synthesizer={synthesizer!r}"
        )
    return tuple(names)


def default_factorized_dense_sizes(max_length):
    """The default `(a, b)` of factorized dense: `a * b >= max_length`."""
    a = int(math.ceil(math.sqrt(max_length)))
    return a, int(math.ceil(max_length / a))


def _batch_size(tensors):
    """The batch size of the first `(B, H, ., .)` tensor, None if all are
    batch-independent `(H, ., .)`."""
    for tensor in tensors:
        if len(tensor.shape) == 4:
            return ops.shape(tensor)[0]
    return None


def _concrete_bool(x):
    """`bool(x)` for an eager tensor, `None` while tracing (jit, tf.function)."""
    try:
        return bool(ops.convert_to_numpy(x))
    except Exception:  # a tracer or symbolic tensor has no value yet
        return None


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerAttention(keras.layers.Layer):
    """Synthesizer attention (Tay et al., 2021), a drop-in for `MultiHeadAttention`.

    Dot-product attention computes its `T x S` alignment logits from
    token-token similarity. A Synthesizer *synthesizes* them instead: from
    each query token alone (`"dense"`, `"factorized_dense"`) or from learned
    parameters that ignore the input (`"random"`, `"fixed_random"`,
    `"factorized_random"`). `"vanilla"` is ordinary dot-product attention,
    and any combination written `"random+vanilla"` (or as a list of names)
    mixes the components' logits with learned per-head weights
    `softmax(w_h)` (initialised equal). Values, the softmax, masking and the
    output projection are those of `keras.layers.MultiHeadAttention`.

    Synthetic variants work for any query and key length up to
    `max_length`; shorter sequences use the leading block of the
    synthesized logits, longer ones raise a `ValueError`.

    Weights (per head `h`; `d` the query width, `ℓ = max_length`):
    - `value/kernel (d, H, value_dim)`, `attention_output/kernel`, as in
      `MultiHeadAttention`.
    - `vanilla`: `vanilla/query/kernel (d, H, key_dim)`,
      `vanilla/key/kernel (d_key, H, key_dim)`.
    - `dense`: `dense/hidden/kernel (d, H, key_dim)`,
      `dense/kernel (H, key_dim, ℓ)`, `dense/bias (H, ℓ)`.
    - `factorized_dense`: `factorized_dense/hidden/kernel (d, H, key_dim)`,
      `factorized_dense/kernel_a (H, key_dim, a)`, `.../kernel_b (H, key_dim, b)`
      and their biases.
    - `random`: `random/logits (H, ℓ, ℓ)`; `fixed_random`:
      `fixed_random/logits (H, ℓ, ℓ)`, not trainable.
    - `factorized_random`: `factorized_random/left (H, ℓ, r)` and `.../right`.
    - mixtures: `mixture_logits (H, N)`, one weight per head and component.
    Biases exist where `use_bias=True`. Logit-path weights are float32 under
    mixed precision, and logits and the softmax are computed in float32.

    Args:
        num_heads: Number of attention heads.
        key_dim: Size of each head of the query-side projections (query and
            key of dot-product attention, the hidden layer of dense
            synthesizers).
        value_dim: Size of each head for value. Defaults to `key_dim`.
        dropout: Dropout probability on the attention probabilities.
        use_bias: Whether projections use biases.
        output_shape: The expected shape of the output tensor, besides the
            batch and sequence dims. Defaults to the query's last dimension.
        synthesizer: The variant: one of `"dense"`, `"random"`,
            `"fixed_random"`, `"factorized_dense"`, `"factorized_random"`,
            `"vanilla"`, or a mixture such as `"random+vanilla"` or
            `["dense", "vanilla"]`. Defaults to `"dense"`.
        max_length: The longest query and key length `ℓ`. Required by every
            variant except pure `"vanilla"` (where it is an optional limit).
        factorized_rank: Rank `r` of `"factorized_random"`. Defaults to 8.
        factorized_dense_sizes: `(a, b)` of `"factorized_dense"`, with
            `a * b >= max_length`. Defaults to `(ceil(sqrt(ℓ)), ceil(ℓ / a))`.
        kernel_initializer: Initializer for kernels.
        bias_initializer: Initializer for biases.
        random_initializer: Initializer for random logits (`R`) and the
            factors of factorized random. Defaults to
            `RandomNormal(stddev=1.0)`.
        kernel_regularizer, bias_regularizer, activity_regularizer,
        kernel_constraint, bias_constraint: as in `MultiHeadAttention`
            (random logits are not regularized or constrained).
        seed: Seed for dropout.
        **kwargs: Base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: Query tensor of shape `(B, T, dim)`.
        value: Value tensor of shape `(B, S, dim)`.
        key: Optional key tensor of shape `(B, S, dim)`; defaults to `value`.
        query_mask, value_mask, key_mask: Optional boolean padding masks of
            shape `(B, T)`, `(B, S)`, `(B, S)`; taken from the inputs' Keras
            masks when not given.
        attention_mask: Optional boolean mask of shape `(B, T, S)`;
            `True` means "may attend".
        return_attention_scores: Whether to also return the attention
            probabilities, of shape `(B, H, T, S)`.
        training: Whether dropout is active.
        use_causal_mask: Whether to apply a causal (lower triangular) mask.
        cache: Optional cache for autoregressive decoding, of the shape
            `initial_cache` returns: `(B, 2, S, H, key_dim)` (keys and values)
            for variants with a dot-product part, `(B, 1, S, H, value_dim)`
            (values only) for pure synthesizers.
        cache_update_index: Optional index at which the new keys/values are
            written into `cache`; `None` uses the cache as it is.
        query_start_index: Position of the first query row in the synthesized
            logits. Defaults to `cache_update_index`, or 0.

    Returns:
        `attention_output` of shape `(B, T, output_shape)`, or a tuple
        `(attention_output, attention_scores)` with
        `return_attention_scores=True`; with a `cache`, the updated cache is
        appended to what is returned.

    Example:

    >>> import numpy as np
    >>> layer = SynthesizerAttention(
    ...     num_heads=2, key_dim=8, synthesizer="random+vanilla",
    ...     max_length=16)
    >>> x = np.random.rand(3, 10, 32).astype("float32")
    >>> y, scores = layer(x, x, return_attention_scores=True)
    >>> tuple(y.shape), tuple(scores.shape)
    ((3, 10, 32), (3, 2, 10, 10))
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        synthesizer="dense",
        max_length=None,
        factorized_rank=8,
        factorized_dense_sizes=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        random_initializer=None,
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        **kwargs,
    ):
        for arg, value, optional in (
            ("num_heads", num_heads, False),
            ("key_dim", key_dim, False),
            ("value_dim", value_dim, True),
            ("max_length", max_length, True),
            ("factorized_rank", factorized_rank, False),
        ):
            if optional and value is None:
                continue
            if not _is_int(value) or value <= 0:
                raise ValueError(
                    f"Received an invalid value for argument `{arg}`, "
                    "expected a positive integer"
                    + (" or `None`" if optional else "")
                    + f". Received: {arg}={value!r}"
                )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                "Received an invalid value for argument `dropout`, expected a "
                f"float in [0, 1). Received: dropout={dropout!r}"
            )
        variants = parse_synthesizer(synthesizer)
        synthetic = [name for name in variants if name != "vanilla"]
        if synthetic and max_length is None:
            raise ValueError(
                f"Argument `max_length` is required by the synthetic variant(s) "
                f"{synthetic}: the synthesized logits are max_length x "
                "max_length. Expected a positive integer. Received: "
                f"max_length=None with synthesizer={synthesizer!r}"
            )
        if "factorized_dense" in variants:
            if factorized_dense_sizes is None:
                factorized_dense_sizes = default_factorized_dense_sizes(
                    max_length
                )
            sizes = tuple(factorized_dense_sizes)
            if len(sizes) != 2 or not all(
                _is_int(s) and s > 0 for s in sizes
            ):
                raise ValueError(
                    "Received an invalid value for argument "
                    "`factorized_dense_sizes`, expected two positive integers "
                    f"(a, b). Received: factorized_dense_sizes="
                    f"{factorized_dense_sizes!r}"
                )
            if sizes[0] * sizes[1] < max_length:
                raise ValueError(
                    "Argument `factorized_dense_sizes` cannot cover "
                    f"max_length={max_length}: expected a * b >= max_length, "
                    f"received factorized_dense_sizes={sizes} "
                    f"(a * b = {sizes[0] * sizes[1]})."
                )
            factorized_dense_sizes = sizes
        super().__init__(**kwargs)
        self.supports_masking = True
        self._num_heads = num_heads
        self._key_dim = key_dim
        self._value_dim = value_dim if value_dim else key_dim
        self._dropout = dropout
        self._use_bias = use_bias
        if output_shape is not None:
            if _is_int(output_shape):
                output_shape = (output_shape,)
            try:
                output_shape = tuple(output_shape)
            except TypeError:
                raise ValueError(
                    "Received an invalid value for argument `output_shape`, "
                    "expected an int, tuple or list. Received: "
                    f"output_shape={output_shape!r}"
                )
        self._output_shape = output_shape
        self._synthesizer = "+".join(variants)
        self._variants = variants
        self._max_length = max_length
        self._factorized_rank = factorized_rank
        self._factorized_dense_sizes = factorized_dense_sizes
        self._kernel_initializer = keras.initializers.get(kernel_initializer)
        self._bias_initializer = keras.initializers.get(bias_initializer)
        if random_initializer is None:
            random_initializer = keras.initializers.RandomNormal(stddev=1.0)
        self._random_initializer = keras.initializers.get(random_initializer)
        self._kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self._bias_regularizer = keras.regularizers.get(bias_regularizer)
        self._activity_regularizer = keras.regularizers.get(
            activity_regularizer
        )
        self._kernel_constraint = keras.constraints.get(kernel_constraint)
        self._bias_constraint = keras.constraints.get(bias_constraint)
        self.seed = seed
        compute_dtype = keras.backend.standardize_dtype(self.compute_dtype)
        self._logits_dtype = (
            "float32" if compute_dtype in ("float16", "bfloat16")
            else compute_dtype
        )
        self._synthesizers = [
            self._make_synthesizer(name) for name in self._variants
        ]
        self._mixture_logits = None
        self._dropout_layer = keras.layers.Dropout(
            rate=dropout, seed=seed, dtype=self.dtype_policy
        )
        # Private switch (tests): False forces the general attention path.
        self._fast_paths = True

    # ------------------------------------------------------------------ API

    @property
    def num_heads(self):
        return self._num_heads

    @property
    def key_dim(self):
        return self._key_dim

    @property
    def value_dim(self):
        return self._value_dim

    @property
    def dropout(self):
        return self._dropout

    @property
    def use_bias(self):
        return self._use_bias

    @property
    def synthesizer(self):
        """The variant, canonical: names joined with `+`."""
        return self._synthesizer

    @property
    def variants(self):
        """The tuple of component variant names."""
        return self._variants

    @property
    def max_length(self):
        return self._max_length

    @property
    def synthesizers(self):
        """The component synthesizer sublayers, in `variants` order."""
        return list(self._synthesizers)

    @property
    def uses_keys(self):
        """Whether any component needs keys (a dot-product part)."""
        return any(s.uses_keys for s in self._synthesizers)

    @property
    def batch_dependent(self):
        """Whether the logits depend on the input (else they are H x T x S)."""
        return any(s.batch_dependent for s in self._synthesizers)

    def mixture_weights(self):
        """The normalised per-head mixture weights `(H, N)`, or `None`."""
        if self._mixture_logits is None:
            return None
        return ops.softmax(self._mixture_logits, axis=-1)

    # ---------------------------------------------------------------- build

    def _sublayer_kwargs(self):
        return dict(
            kernel_initializer=self._kernel_initializer,
            bias_initializer=self._bias_initializer,
            kernel_regularizer=self._kernel_regularizer,
            bias_regularizer=self._bias_regularizer,
            activity_regularizer=self._activity_regularizer,
            kernel_constraint=self._kernel_constraint,
            bias_constraint=self._bias_constraint,
            dtype=self.dtype_policy,
        )

    def _make_synthesizer(self, name):
        cls = synth_lib.SYNTHESIZERS[name]
        extra = {}
        if name == "factorized_dense":
            extra["sizes"] = self._factorized_dense_sizes
        elif name == "factorized_random":
            extra["rank"] = self._factorized_rank
        return cls(
            num_heads=self._num_heads,
            key_dim=self._key_dim,
            max_length=self._max_length,
            use_bias=self._use_bias,
            logits_dtype=self._logits_dtype,
            sublayer_kwargs=self._sublayer_kwargs(),
            random_initializer=self._random_initializer,
            dtype=self.dtype_policy,
            **extra,
        )

    def _projection(self, equation, output_shape, bias_axes, name):
        kw = self._sublayer_kwargs()
        kw["kernel_initializer"] = synth_lib._clone(kw["kernel_initializer"])
        kw["bias_initializer"] = synth_lib._clone(kw["bias_initializer"])
        return synth_lib.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self._use_bias else None,
            name=name,
            **kw,
        )

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for arg, shape in (
            ("query", query_shape),
            ("value", value_shape),
            ("key", key_shape),
        ):
            if len(shape) != 3:
                raise ValueError(
                    f"Argument `{arg}` must have rank 3 (batch, length, "
                    f"features). Received: {arg}.shape={tuple(shape)}"
                )
        if value_shape[1:-1] != key_shape[1:-1]:
            raise ValueError(
                "All dimensions of `value` and `key`, except the last one, "
                f"must be equal. Received: value_shape={value_shape} and "
                f"key_shape={key_shape}"
            )
        self._value_dense = self._projection(
            "bsd,dnh->bsnh", (None, self._num_heads, self._value_dim),
            "nh", "value",
        )
        self._value_dense.build(value_shape)
        for synthesizer in self._synthesizers:
            synthesizer.build(query_shape, key_shape)
        self._mixture_logits = None
        if len(self._synthesizers) > 1:
            self._mixture_logits = self.add_weight(
                name="mixture_logits",
                shape=(self._num_heads, len(self._synthesizers)),
                initializer="zeros",
                dtype=self._logits_dtype,
                autocast=False,
            )
        output_shape = self._output_shape or (query_shape[-1],)
        letters = "defg"[: len(output_shape)]
        self._output_dense = self._projection(
            f"btnh,nh{letters}->bt{letters}",
            (None,) + tuple(output_shape),
            letters,
            "attention_output",
        )
        self._output_dense.build(
            (query_shape[0], query_shape[1], self._num_heads, self._value_dim)
        )

    @property
    def value_dense(self):
        return self._value_dense

    @property
    def output_dense(self):
        return self._output_dense

    # ----------------------------------------------------------------- call

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        query_start_index=None,
    ):
        if key is None:
            key = value
        # Masks are handled here, at the level of the layer (as in MHA).
        if query_mask is None:
            query_mask = _get_keras_mask(query)
        for tensor in (query, value, key):
            _set_keras_mask(tensor, None)

        keys, values, cache = self._project_keys_and_values(
            key, value, cache, cache_update_index
        )
        if query_start_index is None:
            query_start_index = (
                0 if cache_update_index is None else cache_update_index
            )
        query_length = ops.shape(query)[1]
        key_length = ops.shape(values)[1]
        self._check_lengths(query_length, key_length, query_start_index)
        shared = self._uses_shared_path(
            attention_mask, training, return_attention_scores
        )
        if shared:  # H x T x S logits, masks kept factored (no B x H x T x S).
            factored_masks = self._compute_factored_masks(
                query_length,
                key_length,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                use_causal_mask=use_causal_mask,
                query_start_index=query_start_index,
            )
        else:
            attention_mask = self._compute_attention_mask(
                query_length,
                key_length,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
                query_start_index=query_start_index,
            )
        logits = self._compute_logits(
            query, keys, query_start_index, query_length, key_length
        )
        if shared:
            attention_output = self._compute_shared_attention(
                logits, values, *factored_masks
            )
            attention_scores = None
        else:
            attention_output, attention_scores = self._compute_attention(
                logits,
                values,
                attention_mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )
        attention_output = self._output_dense(attention_output)
        if query_mask is not None:
            _set_keras_mask(attention_output, query_mask)

        outputs = (attention_output,)
        if return_attention_scores:
            outputs += (attention_scores,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    # ---------------------------------------------------------------- hooks

    def _project_keys_and_values(self, key, value, cache, cache_update_index):
        """Returns `(keys, values, cache)`, keys `None` for pure synthesizers."""
        uses_keys = self.uses_keys
        if cache is None:
            if cache_update_index is not None:
                raise ValueError(
                    "`cache_update_index` should not be set if `cache` is "
                    f"`None`. Received: cache_update_index={cache_update_index}"
                )
            keys = self._project_key(key) if uses_keys else None
            return keys, self._value_dense(value), None
        self._check_cache(cache)
        values = cache[:, -1, ...]
        keys = cache[:, 0, ...] if uses_keys else None
        if cache_update_index is None:
            return keys, values, cache
        start = [0, cache_update_index, 0, 0]
        values = ops.slice_update(values, start, self._value_dense(value))
        if uses_keys:
            keys = ops.slice_update(keys, start, self._project_key(key))
            cache = ops.stack((keys, values), axis=1)
        else:
            cache = ops.expand_dims(values, 1)
        return keys, values, cache

    def _project_key(self, key):
        for synthesizer in self._synthesizers:
            if synthesizer.uses_keys:
                return synthesizer.project_key(key)
        return None

    def _compute_logits(
        self, query, keys, query_start_index, query_length, key_length
    ):
        """Returns the (mixed) logits: `(B, H, T, S)` or `(H, T, S)`."""
        args = (query, keys, query_start_index, query_length, key_length)
        if len(self._synthesizers) == 1:
            return self._synthesizers[0].logits(*args)
        weights = ops.softmax(self._mixture_logits, axis=-1)  # (H, N)
        # Each component applies its weight to its own smallest tensor: the
        # mixture only adds (H, T, S) / (B, H, T, S) logits, never rescales.
        # Two or more bilinear components share one contraction.
        fuse = (self._fast_paths
                and sum(s.bilinear for s in self._synthesizers) > 1)
        terms, factors = [], []
        for i, synthesizer in enumerate(self._synthesizers):
            if fuse and synthesizer.bilinear:
                factors.append(synthesizer.factors(*args, scale=weights[:, i]))
            else:
                terms.append(synthesizer.logits(*args, scale=weights[:, i]))
        if factors:
            terms.append(self._contract_factors(factors))
        batch_size = _batch_size(terms)
        mixed = None
        for term in terms:
            if batch_size is not None and len(term.shape) == 3:
                term = self._broadcast_to_batch(term, batch_size)
            mixed = term if mixed is None else mixed + term
        return mixed

    def _broadcast_to_batch(self, logits, batch_size):
        """`(H, T, S)` logits repeated `(B, H, T, S)` for a sum with
        batch-dependent ones. On the fast path, as the product
        `ones (B, 1) @ logits (1, H*T*S)`: its gradient is a matrix product
        too, where a broadcast's is a reduction over the batch axis, which
        XLA's CPU backend runs several times slower (a third of a
        `random+vanilla` training step on JAX)."""
        if not self._fast_paths:
            return logits
        shape = tuple(ops.shape(logits))
        ones = ops.ones((batch_size, 1), dtype=logits.dtype)
        # (`ops.einsum`, not `ops.matmul`: Keras' PyTorch `matmul` returns
        # float32 for float64 inputs.)
        product = ops.einsum("bo,on->bn", ones, ops.reshape(logits, (1, -1)))
        return ops.reshape(product, (batch_size,) + shape)

    def _contract_factors(self, factors):
        """`sum_i left_i @ right_i` as one product of the concatenated
        factors (see `Synthesizer.factors`); `(B, H, T, S)` if any factor
        has a batch axis, else `(H, T, S)`."""
        batch_size = _batch_size([f for pair in factors for f in pair])
        if batch_size is None:
            left = ops.concatenate([p[0] for p in factors], axis=-1)
            right = ops.concatenate([p[1] for p in factors], axis=-2)
            return ops.einsum("ntc,ncs->nts", left, right)

        def batched(factor):
            if len(factor.shape) == 4:
                return factor
            return ops.broadcast_to(
                ops.expand_dims(factor, 0),
                (batch_size,) + tuple(ops.shape(factor)),
            )

        left = ops.concatenate([batched(p[0]) for p in factors], axis=-1)
        right = ops.concatenate([batched(p[1]) for p in factors], axis=-2)
        # Batched over (b, n): the product comes out as (B, H, T, S).
        return ops.einsum("bntc,bncs->bnts", left, right)

    def _masked_softmax(self, logits, attention_mask=None, empty_rows=True):
        """Softmax over keys; masked keys get 0, fully masked rows give 0
        (or, with `empty_rows=False`, stay uniform: the caller zeroes their
        outputs after the product with the values, `_zero_rows`)."""
        if attention_mask is None:
            return ops.softmax(logits, axis=-1)
        if len(logits.shape) == 3 and attention_mask.shape[0] == 1:
            mask = attention_mask[0]  # (T, S): logits stay H x T x S.
        else:
            mask = ops.expand_dims(attention_mask, 1)  # (B, 1, T, S)
        # The lowest finite value, not -1e9: logits below -1e9 (large inputs
        # to a dot-product part) would otherwise hand masked keys the weight.
        # Masked keys of a row with any key left get exactly 0.
        lowest = ops.convert_to_tensor(
            _LOWEST[keras.backend.standardize_dtype(logits.dtype)],
            dtype=logits.dtype,
        )
        probs = ops.softmax(ops.where(mask, logits, lowest), axis=-1)
        if not empty_rows:
            return probs
        return probs * ops.cast(mask, probs.dtype)

    @staticmethod
    def _zero_rows(output, rows):
        """Zeroes the `(B, T, H, k_v)` outputs of the queries where the
        boolean `rows (B or 1, T)` is False."""
        rows = ops.expand_dims(ops.expand_dims(rows, -1), -1)
        return output * ops.cast(rows, output.dtype)

    def _compute_attention(
        self,
        logits,
        values,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        """Applies the masked softmax to `logits` and combines `values`.

        Args:
            logits: `(B, H, T, S)` or `(H, T, S)` logits.
            values: projected values `(B, S, H, value_dim)`.
            attention_mask: boolean `(B, T, S)` or `(1, T, S)` mask, or None.

        Returns:
            `(attention_output (B, T, H, value_dim), attention_scores)`, the
            scores `(B, H, T, S)` only if `return_attention_scores`.
        """
        # Fast path: the outputs of rows without keys are zeroed after the
        # product with the values (B x T), not the B x H x T x S
        # probabilities (still masked exactly when returned as scores).
        late = (self._fast_paths and attention_mask is not None
                and not return_attention_scores)
        probs = self._masked_softmax(
            logits, attention_mask, empty_rows=not late
        )
        batch_size = ops.shape(values)[0]
        dropped = probs
        if self._dropout > 0.0 and training:
            if len(probs.shape) == 3:
                # Each example gets its own dropout mask.
                dropped = ops.broadcast_to(
                    probs, (batch_size,) + tuple(ops.shape(probs))
                )
            dropped = self._dropout_layer(dropped, training=training)
        dropped = ops.cast(dropped, values.dtype)
        if len(dropped.shape) == 3:
            output = ops.einsum("nts,bsnh->btnh", dropped, values)
        else:
            output = ops.einsum("bnts,bsnh->btnh", dropped, values)
        scores = None
        if late:
            output = self._zero_rows(output, ops.any(attention_mask, axis=-1))
        if return_attention_scores:
            scores = ops.cast(probs, self.compute_dtype)
            if len(scores.shape) == 3 or scores.shape[0] == 1:
                shape = tuple(ops.shape(scores))[-3:]
                scores = ops.broadcast_to(scores, (batch_size,) + shape)
        return output, scores

    def _uses_shared_path(
        self, attention_mask, training, return_attention_scores
    ):
        """Whether attention runs on `H x T x S` probabilities (fast path).

        Batch-independent logits (random, fixed random, factorized random
        and their mixtures) need no per-example `B x H x T x S` tensor unless
        a per-example `attention_mask`, the returned scores or per-example
        dropout ask for one.
        """
        return (
            self._fast_paths
            and not self.batch_dependent
            and attention_mask is None
            and not return_attention_scores
            and not (self._dropout > 0.0 and training)
        )

    def _compute_factored_masks(
        self,
        query_length,
        key_length,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        use_causal_mask=False,
        query_start_index=0,
    ):
        """The masks of the shared path, not merged.

        Returns `(rows, keys, causal)`: the query mask `(B, T)`, the merged
        key padding mask `(B, S)` and the causal mask `(T, S)`, each boolean
        or `None`. Their conjunction is `_compute_attention_mask`'s mask.
        """
        rows = None
        if query_mask is not None:
            self._check_mask("query_mask", query_mask, (query_length,))
            rows = ops.cast(query_mask, "bool")
        keys = None
        for arg, mask in (("value_mask", value_mask), ("key_mask", key_mask)):
            if mask is not None:
                self._check_mask(arg, mask, (key_length,))
                mask = ops.cast(mask, "bool")
                keys = mask if keys is None else ops.logical_and(keys, mask)
        causal = None
        if use_causal_mask:
            causal = self._compute_causal_mask(
                query_length, key_length, query_start_index
            )[0]
        return rows, keys, causal

    def _compute_shared_attention(self, logits, values, rows, keys, causal):
        """Attention with batch-independent `(H, T, S)` logits.

        Without a key padding mask the probabilities are `H x T x S` (the
        causal mask is `T x S`) and one einsum combines the values. With a
        key padding mask `m (B, S)` the softmax is normalised after the
        product with the values instead of before it:
        `y = (E @ (m * V)) / (E @ m)`, `E = exp(L - c)` with the row maximum
        `c` over the keys some example may attend to, so that nothing of
        size `B x H x T x S` exists. Where a row's logits span more than 80
        (an example's keys could underflow in `E`), the general path runs.

        Args:
            logits: `(H, T, S)` logits.
            values: projected values `(B, S, H, value_dim)`.
            rows, keys, causal: masks from `_compute_factored_masks`.

        Returns:
            `attention_output (B, T, H, value_dim)`.
        """
        if keys is None:
            mask = None if causal is None else ops.expand_dims(causal, 0)
            probs = self._masked_softmax(logits, mask)
            output = ops.einsum(
                "nts,bsnh->btnh", ops.cast(probs, values.dtype), values
            )
        else:
            output = self._key_padded_shared_attention(
                logits, values, keys, causal
            )
        if rows is not None:
            output = self._zero_rows(output, rows)
        return output

    def _key_padded_shared_attention(self, logits, values, keys, causal):
        dtype = logits.dtype
        allowed = ops.any(keys, axis=0, keepdims=True)  # (1, S)
        if causal is not None:
            allowed = ops.logical_and(allowed, causal)  # (T, S)
        finite = _LOWEST[keras.backend.standardize_dtype(dtype)]
        # (convert_to_tensor, not cast: TensorFlow first makes a Python
        # float a float32 tensor, and float64's lowest value overflows it.)
        masked = ops.where(
            allowed, logits, ops.convert_to_tensor(finite, dtype=dtype)
        )
        shift = ops.stop_gradient(ops.max(masked, axis=-1, keepdims=True))
        lowest = ops.min(
            ops.where(
                allowed, logits, ops.convert_to_tensor(-finite, dtype=dtype)
            ),
            axis=-1,
        )
        spread = ops.stop_gradient(ops.squeeze(shift, -1) - lowest)
        safe = ops.all(ops.less(spread, ops.cast(80.0, dtype)))
        key_weights = ops.expand_dims(ops.expand_dims(keys, -1), -1)

        def normalise_after():
            weights = ops.where(
                allowed, ops.exp(masked - shift), ops.cast(0.0, dtype)
            )
            denominator = ops.einsum(
                "nts,bs->btn", weights, ops.cast(keys, dtype)
            )
            numerator = ops.einsum(
                "nts,bsnh->btnh",
                ops.cast(weights, values.dtype),
                values * ops.cast(key_weights, values.dtype),
            )
            denominator = ops.where(
                denominator > 0, denominator, ops.ones_like(denominator)
            )
            return numerator / ops.cast(
                ops.expand_dims(denominator, -1), values.dtype
            )

        def one_example(example_logits, example_values, example_keys):
            # Values (S, H, k_v) and float keys (S,) of one example. The
            # logits are an argument, not a closure, for their gradient.
            mask = ops.expand_dims(ops.greater(example_keys, 0), 0)
            if causal is not None:
                mask = ops.logical_and(mask, causal)  # (T, S)
            probs = self._masked_softmax(
                example_logits, ops.expand_dims(mask, 0)
            )
            return ops.einsum(
                "nts,snh->tnh", ops.cast(probs, values.dtype), example_values
            )

        one_example = keras.remat(one_example)

        @keras.remat
        def per_example(logits, values, float_keys):
            # Exact for any logits, one example at a time, rematerialised:
            # no B x H x T x S tensor, not for the gradient either.
            return ops.map(
                lambda inputs: one_example(logits, *inputs),
                (values, float_keys),
            )

        def fall_back():
            return per_example(logits, values, ops.cast(keys, dtype))

        concrete = _concrete_bool(safe)
        if concrete is not None:  # eager: no cond to trace and compile
            return normalise_after() if concrete else fall_back()
        return ops.cond(safe, normalise_after, fall_back)

    # ----------------------------------------------------- masks and checks

    def _check_lengths(self, query_length, key_length, query_start_index):
        limit = self._max_length
        if limit is None:
            return
        for arg, length in (
            ("query", query_length),
            ("key/value", key_length),
        ):
            if _is_int(length) and length > limit:
                raise ValueError(
                    f"The {arg} sequence length {length} exceeds "
                    f"max_length={limit} of this {self._synthesizer!r} "
                    "SynthesizerAttention layer. Expected a length <= "
                    "max_length; build the layer with a larger `max_length` "
                    "or pass shorter sequences."
                )
        if (
            _is_int(query_length)
            and _is_int(query_start_index)
            and query_start_index + query_length > limit
        ):
            raise ValueError(
                f"Query positions {query_start_index}..."
                f"{query_start_index + query_length - 1} exceed "
                f"max_length={limit}. Expected query_start_index + query "
                f"length <= max_length."
            )

    def _check_cache(self, cache):
        slots = 2 if self.uses_keys else 1
        head_dim = self._key_dim if self.uses_keys else self._value_dim
        shape = tuple(cache.shape)
        expected = (slots, None, self._num_heads, head_dim)
        if len(shape) != 5 or any(
            e is not None and s is not None and s != e
            for s, e in zip(shape[1:], expected)
        ):
            raise ValueError(
                "Argument `cache` has the wrong shape for this "
                f"{self._synthesizer!r} layer. Expected (batch, {slots}, "
                f"length, {self._num_heads}, {head_dim}) as returned by "
                f"`initial_cache`. Received: cache.shape={shape}"
            )

    def _compute_attention_mask(
        self,
        query_length,
        key_length,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        query_start_index=0,
    ):
        """Merges padding, causal and attention masks into `(B|1, T, S)`."""
        masks = []
        if query_mask is not None:
            self._check_mask("query_mask", query_mask, (query_length,))
            masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        for arg, mask in (("value_mask", value_mask), ("key_mask", key_mask)):
            if mask is not None:
                self._check_mask(arg, mask, (key_length,))
                masks.append(ops.expand_dims(ops.cast(mask, "bool"), -2))
        if use_causal_mask:
            masks.append(
                self._compute_causal_mask(
                    query_length, key_length, query_start_index
                )
            )
        if attention_mask is not None:
            self._check_mask(
                "attention_mask", attention_mask, (query_length, key_length)
            )
            masks.append(ops.cast(attention_mask, "bool"))
        if not masks:
            return None
        merged = masks[0]
        for mask in masks[1:]:
            merged = ops.logical_and(merged, mask)
        if len(merged.shape) == 2:
            merged = ops.expand_dims(merged, 0)
        return merged

    def _compute_causal_mask(self, query_length, key_length, query_start=0):
        """A `(1, T, S)` mask: query row `i` (at position `query_start + i`)
        may attend to keys `0..query_start + i`."""
        rows = ops.arange(query_length, dtype="int32") + ops.cast(
            query_start, "int32"
        )
        cols = ops.arange(key_length, dtype="int32")
        mask = ops.greater_equal(
            ops.expand_dims(rows, -1), ops.expand_dims(cols, 0)
        )
        return ops.expand_dims(mask, 0)

    def _check_mask(self, arg, mask, trailing):
        """Checks a mask's static shape: `(batch,) + trailing`.

        The batch size is free; `attention_mask` may also have size 1 where
        it broadcasts (e.g. `(B, 1, S)`), as in `MultiHeadAttention`.
        """
        shape = tuple(mask.shape)
        expected = ("batch",) + tuple(trailing)
        broadcastable = arg == "attention_mask"
        ok = len(shape) == len(expected) and all(
            i == 0
            or not _is_int(s)
            or not _is_int(e)
            or s == e
            or (broadcastable and s == 1)
            for i, (s, e) in enumerate(zip(shape, expected))
        )
        if not ok:
            raise ValueError(
                f"Argument `{arg}` has the wrong shape. Expected "
                f"{expected}"
                + (" or 1 where it broadcasts" if broadcastable else "")
                + f" (True = may attend). Received: {arg}.shape={shape}"
            )

    # ---------------------------------------------------------------- cache

    def initial_cache(self, batch_size, max_length=None, dtype=None):
        """Returns an empty (zero) cache for autoregressive decoding.

        Pure synthesizers need no keys: their cache holds values only,
        `(batch_size, 1, max_length, H, value_dim)`, half the memory of a
        key/value cache. Variants with a dot-product part keep keys too:
        `(batch_size, 2, max_length, H, key_dim)` (this needs
        `key_dim == value_dim`, as keras-nlp's caches do).

        Args:
            batch_size: Batch size.
            max_length: Cache length; defaults to the layer's `max_length`.
            dtype: Defaults to the layer's compute dtype.
        """
        if max_length is None:
            max_length = self._max_length
        if max_length is None:
            raise ValueError(
                "Argument `max_length` is required by `initial_cache` for a "
                "layer built without `max_length`. Received: max_length=None"
            )
        if (
            self._max_length is not None
            and _is_int(max_length)
            and max_length > self._max_length
        ):
            raise ValueError(
                f"Argument `max_length`={max_length} of `initial_cache` "
                f"exceeds the layer's max_length={self._max_length}."
            )
        if self.uses_keys:
            if self._key_dim != self._value_dim:
                raise ValueError(
                    "A cache with keys needs key_dim == value_dim. Received: "
                    f"key_dim={self._key_dim}, value_dim={self._value_dim}"
                )
            shape = (batch_size, 2, max_length, self._num_heads,
                     self._key_dim)
        else:
            shape = (batch_size, 1, max_length, self._num_heads,
                     self._value_dim)
        return ops.zeros(shape, dtype=dtype or self.compute_dtype)

    # -------------------------------------------------------- serialization

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        if self._output_shape:
            return query_shape[:-1] + tuple(self._output_shape)
        return query_shape

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        query_start_index=None,
    ):
        output = keras.KerasTensor(
            self.compute_output_shape(query.shape, value.shape),
            dtype=self.compute_dtype,
        )
        outputs = (output,)
        if return_attention_scores:
            key_length = (cache.shape[2] if cache is not None
                          else value.shape[1])
            outputs += (
                keras.KerasTensor(
                    (query.shape[0], self._num_heads, query.shape[1],
                     key_length),
                    dtype=self.compute_dtype,
                ),
            )
        if cache is not None:
            outputs += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
        return outputs[0] if len(outputs) == 1 else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self._num_heads,
                "key_dim": self._key_dim,
                "value_dim": self._value_dim,
                "dropout": self._dropout,
                "use_bias": self._use_bias,
                "output_shape": self._output_shape,
                "synthesizer": self._synthesizer,
                "max_length": self._max_length,
                "factorized_rank": self._factorized_rank,
                "factorized_dense_sizes": self._factorized_dense_sizes,
                "kernel_initializer": keras.initializers.serialize(
                    self._kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self._bias_initializer
                ),
                "random_initializer": keras.initializers.serialize(
                    self._random_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(
                    self._kernel_regularizer
                ),
                "bias_regularizer": keras.regularizers.serialize(
                    self._bias_regularizer
                ),
                "activity_regularizer": keras.regularizers.serialize(
                    self._activity_regularizer
                ),
                "kernel_constraint": keras.constraints.serialize(
                    self._kernel_constraint
                ),
                "bias_constraint": keras.constraints.serialize(
                    self._bias_constraint
                ),
                "seed": self.seed,
            }
        )
        return config
