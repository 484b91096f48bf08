"""`SynthesizerAttention`: synthesized attention as a Keras 3 layer.

The layer holds the projections and composes the parts, each in a module of
its own: `synthesizers` (one class per variant, its logits formula in
place), `mixture` (mixing several variants), `attention_masks`,
`attention_paths` (which path runs), `general_attention` (the
`B x H x T x S` path), `shared_attention` (the batch-shared `H x T x S`
path), `attention_cache` (the cache), `decoding` (its methods: `initial_cache`,
projecting into the cache, position checks), `synthesizer_arguments` (checks).
docs/design.md gives the equations and when each path applies.
"""

import keras
from keras import ops

from keras_synth.layers.attention import arguments
from keras_synth.layers.attention import cache as attention_cache
from keras_synth.layers.attention.decoding import CachedDecodingMixin
from keras_synth.layers.attention import masks as attention_masks
from keras_synth.layers.attention import paths as attention_paths
from keras_synth.layers.graph_checks import with_checks
from keras_synth.layers.keras_utils import EinsumDense
from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.layers.keras_utils import get_keras_mask
from keras_synth.layers.keras_utils import set_keras_mask
from keras_synth.layers.keras_utils import with_quantized_dtype
from keras_synth.layers.synthesizers import deserialize_options
from keras_synth.layers.synthesizers import get_synthesizer
from keras_synth.layers.synthesizers import mixture
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.layers.synthesizers import serialize_options
from keras_synth.layers.synthesizers import split_options
from keras_synth.layers.synthesizers.legacy import pop_legacy_options


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerAttention(CachedDecodingMixin, keras.layers.Layer):
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
    - `light_conv`: `light_conv/kernel (H, K)`; `dynamic_conv`:
      `dynamic_conv/projection/kernel (d, H, K)`, `K` the `kernel_size`.
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
            `"vanilla"`, the convolutions `"light_conv"` and
            `"dynamic_conv"` (a window of `kernel_size` keys per query),
            a variant registered with `register_synthesizer`,
            or a mixture such as `"random+vanilla"` or
            `["dense", "vanilla"]`. Defaults to `"dense"`.
        max_length: The longest query and key length `ℓ`. Required by every
            variant except `"vanilla"`, `"light_conv"` and `"dynamic_conv"`
            and their mixtures (where it is an optional limit).
        synthesizer_options: Optional dict of the variants' options, each
            owned by its variant (docs/layer.md lists them): flat, going to
            every component that has the option, e.g. `{"rank": 4}`
            (`"factorized_random"`'s rank, default 8), `{"sizes": (4, 4)}`
            (`"factorized_dense"`'s `(a, b)`), `{"initializer": ...}` (the
            random variants' initializer, default `RandomNormal(1.0)`),
            `{"kernel_size": 5, "padding": "causal"}` (the convolutions'
            window, default 3 keys, `"centered"`); or per variant, e.g.
            `{"factorized_random": {"rank": 4}}`. An option no component
            has is an error. (Release 0.1's one argument per option still
            works, deprecated.)
        kernel_initializer: Initializer for kernels.
        bias_initializer: Initializer for biases.
        kernel_regularizer, bias_regularizer, activity_regularizer,
        kernel_constraint, bias_constraint: as in `MultiHeadAttention`
            (random logits are not regularized or constrained).
        use_gate: Whether to gate the attention output as current Keras's
            `MultiHeadAttention` does: `sigmoid(query W_g + b_g)` of shape
            `(B, T, H, value_dim)` (weight `gate/kernel`) multiplies each
            head's output before the output projection. Any variant.
        sliding_window: Optional positive integer: each query attends only
            to keys within `sliding_window - 1` positions of its own, either
            side (with `use_causal_mask`, the causal sliding window). Any
            variant; positions count from `query_start_index` when decoding.
        attention_axes: Only `None` (or `1`, `-2`: the sequence axis) is
            accepted; synthesized logits exist for one sequence axis.
        flash_attention: For a variant with a dot-product part
            (`"vanilla"`, `"random+vanilla"`, `"dense+vanilla"`, ...), as in
            `MultiHeadAttention`: `True` computes attention with
            `keras.ops.dot_product_attention(..., flash_attention=True)`,
            the other components' logits as its `bias` (a fused kernel on
            GPUs; an error where the backend has none, and with dropout or
            returned scores); `None` (default) does so on a GPU or TPU,
            or as `keras.config.enable_flash_attention()` says, and keeps
            the layer's own path on the CPU, where it is not slower; `False`
            never. Pure synthesizers accept only `None` or `False`: no
            flash kernel computes synthesized logits.
        seed: Seed for dropout.
        **kwargs: Base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: Query tensor of shape `(B, T, dim)`.
        value: Value tensor of shape `(B, S, dim)`.
        key: Optional key tensor of shape `(B, S, dim)`; defaults to `value`.
        query_mask, value_mask, key_mask: Optional boolean padding masks of
            shape `(B, T)`, `(B, S)`, `(B, S)`; taken from the inputs' Keras
            masks when not given.
        attention_mask: Optional boolean mask, `True` meaning "may
            attend", of shape `(B, T, S)` (an axis may be 1 where it
            broadcasts), `(T, S)` or per head `(B, H, T, S)`, as in
            `MultiHeadAttention`. For the batch-independent variants
            (random, fixed random, factorized random and their mixtures) a
            key padding mask `(B, 1, S)` and a batch-independent `(T, S)`
            or `(1, T, S)` mask keep the fast batch-shared path, as do
            `query_mask`, `value_mask`, `key_mask`, `use_causal_mask` and
            `sliding_window`; other shapes need per-example probabilities
            (`B x H x T x S`), as do returned scores and active dropout.
        return_attention_scores: Whether to also return the attention
            probabilities, of shape `(B, H, T, S)`.
        training: Whether dropout is active.
        use_causal_mask: Whether to apply a causal (lower triangular) mask.
        cache: Optional cache for autoregressive decoding, of the shape
            `initial_cache` returns: `(B, 2, S, H, key_dim)` (keys and values)
            for variants with a dot-product part, `(B, 1, S, H, value_dim)`
            (values only) for pure synthesizers.
        cache_update_index: Optional index at which the new keys/values are
            written into `cache`; `None` uses the cache as it is. An index
            whose query rows pass `max_length`, or whose write passes the
            cache's end, raises a `ValueError` when its value is known
            (an int, an eager tensor); under `jax.jit` or `tf.function` it
            is a traced value, and the outputs are NaN instead, as are the
            cache rows written (the compilers clamp such a write into the
            cache's last rows). With
            `use_causal_mask=True` (and no `attention_mask`) a step reads
            only the cache rows up to its last query position (whole
            blocks of rows under a compiler).
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
        synthesizer_options=None,
        use_gate=False,
        sliding_window=None,
        attention_axes=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        **kwargs,
    ):
        arguments.check_positive_ints(
            num_heads=(num_heads, False),
            key_dim=(key_dim, False),
            value_dim=(value_dim, True),
            max_length=(max_length, True),
        )
        arguments.check_dropout(dropout)
        arguments.check_sliding_window(sliding_window)
        arguments.check_attention_axes(attention_axes)
        variants = parse_synthesizer(synthesizer)
        arguments.check_flash_attention(flash_attention, variants, dropout)
        classes = [get_synthesizer(name) for name in variants]
        arguments.check_max_length(classes, max_length, synthesizer)
        synthesizer_options = pop_legacy_options(
            kwargs, variants, synthesizer_options)
        options = {
            cls.variant: cls.resolve_options(given, max_length)
            for cls, given in zip(
                classes, split_options(variants, synthesizer_options).values()
            )
        }
        output_shape = arguments.output_shape_tuple(output_shape)
        super().__init__(**kwargs)
        self.supports_masking = True
        self._num_heads = num_heads
        self._key_dim = key_dim
        self._value_dim = value_dim if value_dim else key_dim
        self._dropout = dropout
        self._use_bias = use_bias
        self._output_shape = output_shape
        self._synthesizer = "+".join(variants)
        self._variants = variants
        self._max_length = max_length
        self._synthesizer_options = options
        self._use_gate = bool(use_gate)
        self._sliding_window = sliding_window
        self._flash_attention = flash_attention
        self._kernel_initializer = keras.initializers.get(kernel_initializer)
        self._bias_initializer = keras.initializers.get(bias_initializer)
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
        self._gate_dense = None
        self._dropout_layer = keras.layers.Dropout(
            rate=dropout, seed=seed, dtype=self.dtype_policy
        )

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
    def use_gate(self):
        return self._use_gate

    @property
    def sliding_window(self):
        return self._sliding_window

    @property
    def attention_axes(self):
        """The attended axis, `(1,)`: the sequence axis of the inputs."""
        return (1,)

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
    def synthesizer_options(self):
        """The resolved options of each component, `{variant: {option:
        value}}` (defaults filled in)."""
        return {name: dict(opts)
                for name, opts in self._synthesizer_options.items()}

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

    @property
    def mixture_logits(self):
        """The `(H, N)` mixture weight before its softmax, or `None`."""
        return self._mixture_logits

    def mixture_weights(self):
        """The normalised per-head mixture weights `(H, N)`, or `None`."""
        if self._mixture_logits is None:
            return None
        return ops.softmax(self._mixture_logits, axis=-1)

    @property
    def value_dense(self):
        return self._value_dense

    @property
    def output_dense(self):
        return self._output_dense

    @property
    def gate_dense(self):
        """The gate projection with `use_gate=True`, else `None`."""
        return self._gate_dense

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
        return get_synthesizer(name)(
            num_heads=self._num_heads,
            key_dim=self._key_dim,
            max_length=self._max_length,
            use_bias=self._use_bias,
            logits_dtype=self._logits_dtype,
            sublayer_kwargs=self._sublayer_kwargs(),
            options=self._synthesizer_options[name],
            dtype=self.dtype_policy,
        )

    def _projection(self, equation, output_shape, bias_axes, name,
                    activation=None):
        kw = self._sublayer_kwargs()
        kw["kernel_initializer"] = clone_initializer(kw["kernel_initializer"])
        kw["bias_initializer"] = clone_initializer(kw["bias_initializer"])
        return EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self._use_bias else None,
            activation=activation,
            name=name,
            **kw,
        )

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        arguments.check_input_shapes(query_shape, value_shape, key_shape)
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
        if self._use_gate:
            self._gate_dense = self._projection(
                "btd,dnh->btnh", (None, self._num_heads, self._value_dim),
                "nh", "gate", activation="sigmoid",
            )
            self._gate_dense.build(query_shape)
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
        if return_attention_scores and self._resolved_flash_attention():
            raise ValueError(
                "Returning attention scores is not supported when flash "
                "attention is enabled. Expected return_attention_scores="
                "False, or flash_attention=False. Received: "
                "return_attention_scores=True, flash_attention=True"
            )
        arguments.check_input_shapes(query.shape, value.shape, key.shape)
        # Masks are handled here, at the level of the layer (as in MHA).
        if query_mask is None:
            query_mask = get_keras_mask(query)
        for tensor in (query, value, key):
            set_keras_mask(tensor, None)

        if query_start_index is None:
            query_start_index = (
                0 if cache_update_index is None else cache_update_index
            )
        query_length = ops.shape(query)[1]
        # Checked before the cache is written: a write out of range would
        # be clamped (JAX, XLA) or fail with an index error (PyTorch).
        in_range, checks = self._check_positions(
            query_start_index, query_length, ops.shape(value)[1], cache,
            cache_update_index,
        )
        # Lengths known only when a TensorFlow graph runs: checked first.
        query, value, key = with_checks(checks, query, value, key)
        keys, values, cache = self._project_keys_and_values(
            key, value, cache, cache_update_index, in_range
        )
        def attend(rows=None):
            """Attention over the first `rows` keys/values (all: `None`)."""
            prefix = slice(None, rows)
            rows_keys, rows_values = (
                (None if keys is None else keys[:, prefix], values[:, prefix])
                if cache is None or rows is None
                else attention_cache.read_rows(cache, rows))
            return self._compute_attention(
                query,
                rows_keys,
                rows_values,
                query_start=query_start_index,
                query_mask=query_mask,
                value_mask=None if value_mask is None else value_mask[:, prefix],
                key_mask=None if key_mask is None else key_mask[:, prefix],
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )

        if (cache_update_index is not None and use_causal_mask
                and attention_mask is None and not return_attention_scores):
            # Causal decoding reads the cache rows up to its position only.
            attention_scores = None
            attention_output = attention_cache.read_prefix(
                query_start_index + query_length, ops.shape(values)[1],
                lambda rows: attend(rows)[0],
            )
        else:
            attention_output, attention_scores = attend()
        if self._gate_dense is not None:
            attention_output = attention_output * self._gate_dense(query)
        attention_output = self._output_dense(attention_output)
        attention_output = attention_cache.nan_unless(
            in_range, attention_output
        )
        if query_mask is not None:
            set_keras_mask(attention_output, query_mask)

        outputs = (attention_output,)
        if return_attention_scores:
            outputs += (attention_scores,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    # ---------------------------------------------------------------- hooks
    # Override points, as `MultiHeadAttention`'s: a subclass that overrides
    # `_compute_logits` or `_masked_softmax` gets the general path (every
    # fast path off, `B x H x T x S` probabilities through its methods),
    # as MHA leaves its fused kernels when `_compute_attention` is
    # overridden; one that overrides `_compute_attention` replaces it all.

    def _compute_logits(self, query, keys, query_start, query_length,
                        key_length):
        """The (mixed) attention logits before masking and the softmax.

        Args:
            query: the query input `(B, T, d)` (not projected: each
                synthesizer projects what it needs).
            keys: projected keys `(B, S, H, key_dim)`, or `None` without a
                dot-product component.
            query_start: position of the first query row.
            query_length: `T`.
            key_length: `S`.

        Returns:
            `(B, H, T, S)` logits, or `(H, T, S)` when no component depends
            on the input, in float32 under mixed precision.
        """
        return mixture.mixed_logits(
            self._synthesizers, self.mixture_weights(),
            (query, keys, query_start, query_length, key_length),
        )

    def _masked_softmax(self, logits, attention_mask=None):
        """Probabilities over the keys: the softmax of `logits` where
        `attention_mask` (boolean, broadcastable to the logits, `True` =
        may attend) allows, rows without any allowed key all zero."""
        return attention_masks.masked_softmax(logits, attention_mask)

    def _uses_fast_paths(self):
        """Whether `_compute_logits` and `_masked_softmax` are this class's
        own, so that the batch-shared and fused paths (which equal them)
        may run instead."""
        cls = type(self)
        return (
            cls._compute_logits is SynthesizerAttention._compute_logits
            and cls._masked_softmax is SynthesizerAttention._masked_softmax
        )

    def _compute_attention(self, query, keys, values, query_start=0,
                           query_mask=None, value_mask=None, key_mask=None,
                           attention_mask=None, use_causal_mask=False,
                           training=None, return_attention_scores=False):
        """Attention of projected keys and values, before the output
        projection (and the gate).

        Args:
            query: the query input `(B, T, d)`.
            keys: projected keys `(B, S, H, key_dim)` or `None`.
            values: projected values `(B, S, H, value_dim)`.
            query_start: position of the first query row.
            query_mask, value_mask, key_mask, attention_mask,
            use_causal_mask, training, return_attention_scores: as `call`'s.

        Returns:
            `(attention_output (B, T, H, value_dim), scores)`, the scores
            `(B, H, T, S)` or `None` without `return_attention_scores`.
        """
        fast = self._uses_fast_paths()
        return attention_paths.attend(
            self._synthesizers,
            self.mixture_weights(),
            query,
            keys,
            values,
            query_start=query_start,
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            sliding_window=self._sliding_window,
            dropout_layer=self._dropout_layer,
            training=training,
            return_attention_scores=return_attention_scores,
            scores_dtype=self.compute_dtype,
            fast_paths=fast,
            compute_logits=None if fast else self._compute_logits,
            masked_softmax=None if fast else self._masked_softmax,
            flash_attention=self._resolved_flash_attention(),
        )

    def _resolved_flash_attention(self):
        """`flash_attention`, or Keras's global setting where it is `None`
        (`keras.config.enable_flash_attention`), as `MultiHeadAttention`
        reads them; `None` for a variant without a dot-product part."""
        if "vanilla" not in self._variants:
            return None
        if self._flash_attention is not None:
            return self._flash_attention
        return keras.config.is_flash_attention_enabled()

    # -------------------------------------------------------- serialization

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        value_shape = tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        arguments.check_input_shapes(query_shape, value_shape, key_shape)
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
            self.compute_output_shape(
                query.shape, value.shape, None if key is None else key.shape
            ),
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
                "synthesizer_options": serialize_options(
                    self._synthesizer_options),
                "use_gate": self._use_gate,
                "sliding_window": self._sliding_window,
                "flash_attention": self._flash_attention,
                "kernel_initializer": keras.initializers.serialize(
                    self._kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self._bias_initializer
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
        return with_quantized_dtype(self, config)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        options = deserialize_options(config.pop("synthesizer_options", None))
        # Configs saved by release 0.1 carry the options as flat keys.
        options = pop_legacy_options(
            config, parse_synthesizer(config.get("synthesizer", "dense")),
            options, warn=False)
        return cls(synthesizer_options=options, **config)
