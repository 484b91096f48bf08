"""`Synthesizer`: the base class of every variant, built-in or user-defined.

A synthesizer turns its inputs into attention logits. Each variant is one
subclass in a file of its own: its options and their defaults (`defaults`,
checked by `resolve_options`), its weights (`build`), its logits (`logits`,
or `factors` when they are a product `left @ right`), and its cost
(`flops`; the parameter count is Keras's `count_params()`).
`SynthesizerAttention` composes the registered variants
(`register_synthesizer`); the subclass never sees masks, caches, values or
the softmax.

Shapes (docs/design.md notation): the query input is `(B, T, d)`, projected
keys are `(B, S, H, k)`. `logits` returns `(B, H, T, S)` for variants that
depend on the input and `(H, T, S)` for those that do not
(`batch_dependent = False`), in `logits_dtype` (float32 under mixed
precision).
"""

import keras
import numpy as np
from keras import ops

from keras_synth.layers.keras_utils import EinsumDense
from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.layers.synthesizers.lora import SynthesizerLora
from keras_synth.layers.synthesizers.quantization import SynthesizerQuantization
from keras_synth.layers.synthesizers.quantization import quantize_rows


class Synthesizer(SynthesizerLora, SynthesizerQuantization,
                  keras.layers.Layer):
    """Base class of the synthesizers.

    Subclasses set the class attributes below, `defaults` (option name ->
    default value), and implement `build(query_shape, key_shape)` and
    `logits(...)` (or `factors(...)` with `bilinear = True`). They are
    created by `SynthesizerAttention`, never by users directly; register a
    subclass with `keras_synth.layers.register_synthesizer` to use it there.

    Args:
        num_heads: number of heads `H`.
        key_dim: size per head `k` of the query-side projections.
        max_length: `ℓ`, the longest query and key length (`None` only for
            variants with `needs_max_length = False`).
        use_bias: whether projections have biases.
        logits_dtype: dtype of the returned logits.
        sublayer_kwargs: keyword arguments for the `EinsumDense` sublayers
            (initializers, regularizers, constraints, dtype policy).
        options: this variant's options, already resolved
            (`resolve_options`); read them as `self.options[name]`.
        **kwargs: base layer arguments.

    Example (docs/synthesizers.md explains each part):

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_synth.layers import SynthesizerAttention
    >>> from keras_synth.layers import register_synthesizer
    >>> @register_synthesizer("causal_decay_doc", override=True)
    ... class CausalDecay(Synthesizer):
    ...     # L_h[t, s] = -rate_h |t - s|, one learned rate per head.
    ...     batch_dependent = False
    ...     needs_max_length = False
    ...     def build(self, query_shape, key_shape):
    ...         self.rate = self.add_logit_weight(
    ...             "rate", (self.num_heads,), "ones")
    ...     def logits(self, query, key, query_start, query_length,
    ...                key_length, scale=None):
    ...         rows = ops.arange(query_length) + query_start
    ...         distance = ops.abs(rows[:, None] - ops.arange(key_length))
    ...         return -self.rate[:, None, None] * ops.cast(
    ...             distance, self.logits_dtype)
    >>> layer = SynthesizerAttention(num_heads=2, key_dim=4,
    ...                              synthesizer="causal_decay_doc+vanilla")
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> tuple(layer(x, x).shape)
    (2, 5, 8)
    """

    # Set by `register_synthesizer`: the name in `synthesizer="..."`.
    variant = None
    # Option name -> default value; `resolve_options` fills and checks them.
    defaults = {}
    # Whether the logits depend on the input (B x H x T x S) or not (H x T x S).
    batch_dependent = True
    # Whether the logits need the projected keys (dot-product attention).
    uses_keys = False
    # Whether `factors` gives the logits as a product of two factors.
    bilinear = False
    # Whether the variant needs `max_length` (its logits are ℓ x ℓ at most).
    needs_max_length = True
    # Whether `logits`/`factors` apply a mixture's per-head `scale`
    # themselves (to their smallest tensor); else the mixture multiplies
    # the logits (or the left factor) by it.
    applies_scale = False

    def __init__(self, num_heads, key_dim, max_length, use_bias=True,
                 logits_dtype="float32", sublayer_kwargs=None, options=None,
                 **kwargs):
        kwargs.setdefault("name", self.variant)
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.max_length = max_length
        self.use_bias = use_bias
        self.logits_dtype = logits_dtype
        self.sublayer_kwargs = dict(
            kernel_initializer="glorot_uniform", bias_initializer="zeros",
            kernel_regularizer=None, bias_regularizer=None,
            kernel_constraint=None, bias_constraint=None,
        )
        self.sublayer_kwargs.update(sublayer_kwargs or {})
        self.options = dict(options if options is not None
                            else self.resolve_options({}, max_length))

    # ------------------------------------------------------------- options

    @classmethod
    def resolve_options(cls, options, max_length):
        """Returns `options` checked, with the defaults filled in.

        Raises a `ValueError` naming the option for a name not in
        `defaults`. Subclasses extend this to check values and to derive
        defaults from `max_length` (call `super().resolve_options` first).
        """
        unknown = sorted(set(options) - set(cls.defaults))
        if unknown:
            accepted = ", ".join(sorted(cls.defaults)) or "none"
            raise ValueError(
                f"Unknown option(s) {unknown} for synthesizer "
                f"{cls.variant!r} in argument `synthesizer_options`. "
                f"Options of {cls.variant!r}: {accepted}. Received: "
                f"synthesizer_options={{{cls.variant!r}: {dict(options)!r}}}"
            )
        resolved = dict(cls.defaults)
        resolved.update(options)
        return resolved

    @staticmethod
    def serialize_option(value):
        """An option value as JSON-friendly config (Keras objects as their
        serialized config, tuples as lists)."""
        if value is None or isinstance(value, (bool, int, float, str, dict)):
            return value  # (a dict: a Keras object's config already)
        if isinstance(value, (list, tuple)):
            return [Synthesizer.serialize_option(v) for v in value]
        return keras.saving.serialize_keras_object(value)

    @staticmethod
    def deserialize_option(value):
        """The inverse of `serialize_option` (lists stay lists)."""
        if isinstance(value, dict) and "class_name" in value:
            return keras.saving.deserialize_keras_object(value)
        return value

    # ------------------------------------------------------------- weights

    def add_logit_weight(self, name, shape, initializer, trainable=True,
                         regularized=True):
        """A weight of the logit path, kept in `logits_dtype` (float32 under
        mixed precision, never autocast). With `regularized`, the layer's
        kernel (or, for names starting with "bias", bias) regularizer and
        constraint apply."""
        kw = self.sublayer_kwargs
        kind = "bias" if name.startswith("bias") else "kernel"
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=clone_initializer(keras.initializers.get(initializer)),
            regularizer=kw[f"{kind}_regularizer"] if regularized else None,
            constraint=kw[f"{kind}_constraint"] if regularized else None,
            trainable=trainable,
            dtype=self.logits_dtype,
            autocast=False,
        )

    def built_projection(self, name, activation, input_shape, size=None):
        """A built `EinsumDense` from `(B, T, d)` to `(B, T, H, size)`
        (`size` defaults to `key_dim`), with the layer's initializers,
        regularizers and constraints."""
        kw = dict(self.sublayer_kwargs)
        kw["kernel_initializer"] = clone_initializer(kw["kernel_initializer"])
        kw["bias_initializer"] = clone_initializer(kw["bias_initializer"])
        projection = EinsumDense(
            "btd,dnk->btnk",
            output_shape=(None, self.num_heads, size or self.key_dim),
            bias_axes="nk" if self.use_bias else None,
            activation=activation,
            name=name,
            **kw,
        )
        projection.build(input_shape)
        return projection

    def add_kernel_and_bias(self, suffix, size):
        """The `(H, key_dim, size)` kernel and, with `use_bias`, the
        `(H, size)` bias (else `None`) that map a hidden layer to `size`
        logits, named `kernel{suffix}` and `bias{suffix}`."""
        kw = self.sublayer_kwargs
        kernel = self.add_logit_weight(
            f"kernel{suffix}", (self.num_heads, self.key_dim, size),
            kw["kernel_initializer"],
        )
        bias = None
        if self.use_bias:
            bias = self.add_logit_weight(
                f"bias{suffix}", (self.num_heads, size),
                kw["bias_initializer"],
            )
        return kernel, bias

    def zero_logits(self):
        """Sets weights (of the built layer) so that the logits are zero for
        every input, with a non-zero gradient left (the variant can still
        learn).

        `keras_synth.models.convert_keras_hub_backbone` calls it on the
        non-vanilla components of a mixture, so that the converted model
        computes what the dot-product source computes. The built-in
        variants zero their last linear map (random: `R`; dense: `W2, b2`;
        factorized random: `R2`; factorized dense: `W2_b, b_b`). A
        user-defined variant overrides it to support conversion; the
        default raises a `NotImplementedError`.
        """
        raise NotImplementedError(
            f"Synthesizer {self.variant!r} ({type(self).__name__}) does not "
            "implement `zero_logits()`, which conversion from a keras-hub "
            "checkpoint needs: override it to set the variant's weights so "
            "that its logits are zero (e.g. zero its last linear map)."
        )

    def assign_zeros(self, *weights):
        """Assigns zeros to each of `weights` (skipping `None`)."""
        for weight in weights:
            if weight is not None:
                weight.assign(ops.zeros(weight.shape, weight.dtype))

    # -------------------------------------------------------------- logits

    def window(self, query_start, query_length, key_length):
        """The keys the logits exist for: a boolean `(T, S)` mask (`True`
        = may attend), or `None` for every key (the default).

        A variant whose logits are defined on a band only (the convolution
        synthesizers: `kernel_size` keys around each query) returns it; the
        layer applies it as it applies the causal mask, so it restricts
        the whole mixture (the logits outside it are `-inf`) and combines
        with the other masks. Arguments as in `logits`.
        """
        return None

    def project_key(self, key):
        """Projects the key input; `None` for synthesizers without keys."""
        return None

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        """Returns the attention logits of this synthesizer.

        Args:
            query: the query input `(B, T, d)`.
            key: projected keys `(B, S, H, k)`, or `None` if `uses_keys` is
                False.
            query_start: position of the first query row (0, or the cache
                index during decoding); an int or a scalar tensor.
            query_length: `T`.
            key_length: `S`.
            scale: optional per-head factors `(H,)` (the mixture weights),
                passed only to variants with `applies_scale = True`, which
                apply them to the smallest tensor that the logits are
                linear in (`scaled`), so that a mixture never rescales
                `B x H x T x S` logits. Other variants get `None` and the
                mixture scales their logits.
        """
        if self.bilinear:
            left, right = self.factors(
                query, key, query_start, query_length, key_length, scale)
            if len(left.shape) == 3 and len(right.shape) == 3:
                return ops.einsum("ntc,ncs->nts", left, right)
            return batched_product(left, right)
        raise NotImplementedError(
            f"{type(self).__name__} must implement `logits` (or `factors` "
            "with `bilinear = True`)."
        )

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        """The logits as a product `left @ right`, or `None`.

        Synthesizers whose logits are bilinear (`bilinear = True`) return
        `(left, right)`, `left (B, H, T, c)` or `(H, T, c)` and
        `right (B, H, c, S)` or `(H, c, S)`, with `left @ right` equal to
        `logits(...)`. A mixture concatenates its components' factors along
        `c` and contracts them once. Arguments as in `logits`.
        """
        return None

    def scaled_logits(self, query, key, query_start, query_length,
                      key_length, scale=None):
        """`logits(...)` times the per-head `scale` (a mixture's weights),
        by the variant itself where it `applies_scale`."""
        args = (query, key, query_start, query_length, key_length)
        if scale is None or self.applies_scale:
            return self.logits(*args, scale=scale)
        return scaled(self.logits(*args), scale, -3)

    def scaled_factors(self, query, key, query_start, query_length,
                       key_length, scale=None):
        """`factors(...)` with the left factor times the per-head `scale`,
        by the variant itself where it `applies_scale`."""
        args = (query, key, query_start, query_length, key_length)
        if scale is None or self.applies_scale:
            return self.factors(*args, scale=scale)
        left, right = self.factors(*args)
        return scaled(left, scale, -3), right

    # -------------------------------------------------------------- saving

    # Attribute names of the layer's own weights, in the order Keras saves
    # them: set by the variants with LoRA or int8 support, whose saving
    # merges the LoRA update and keeps the int8 scales.
    stored_weights = ()

    def stored_names(self):
        """The attributes saved, without LoRA adapters: `stored_weights`
        that exist, each int8 one followed by its scale."""
        names = []
        for attribute in self.stored_weights:
            if getattr(self, attribute, None) is None:
                continue
            names.append(attribute)
            if self.is_quantized_weight(attribute):
                names.append(f"{attribute}_scale")
        return names

    def stored_values(self):
        """What `save_own_variables` writes: the weights, the LoRA update
        merged into its weight (re-quantized if int8), or for a variant
        whose update cannot merge, the adapters (`A` times the LoRA scale)
        after the weights."""
        values = {name: getattr(self, name) for name in self.stored_names()}
        if not self.lora_enabled:
            return list(values.values())
        if self.lora_mergeable:
            target = self.lora_weights[0]
            merged = self.float_weight(target) + self.lora_delta()
            if self.is_quantized_weight(target):
                values[target], values[f"{target}_scale"] = quantize_rows(
                    merged)
            else:
                values[target] = merged
            return list(values.values())
        return list(values.values()) + list(self.lora_factors())

    def save_own_variables(self, store):
        if not self.stored_weights or not self.built:
            return super().save_own_variables(store)
        for i, value in enumerate(self.stored_values()):
            store[str(i)] = ops.convert_to_numpy(value)

    def load_own_variables(self, store):
        if not self.stored_weights or not self.built:
            return super().load_own_variables(store)
        names = self.stored_names()
        count = len(store.keys())
        adapters = count - len(names)
        if adapters not in (0, 2) or (adapters and self.lora_mergeable):
            raise ValueError(
                f"Synthesizer {self.variant!r} (layer {self.path!r}) expects "
                f"{len(names)} saved weights ({', '.join(names)}), or 2 more "
                "for LoRA adapters that do not merge. Received: "
                f"{count} weights.")
        if adapters and not self.lora_enabled:
            # A LoRA update that cannot merge (factorized random) was saved
            # as its adapters: the layer gets them back.
            self.enable_lora(int(store[str(len(names) + 1)].shape[1]))
        for i, name in enumerate(names):
            getattr(self, name).assign(store[str(i)])
        if adapters:
            self.lora_kernel_a.assign(
                np.asarray(store[str(len(names))]) / self.lora_scale)
            self.lora_kernel_b.assign(store[str(len(names) + 1)])
        elif self.lora_enabled:  # The update is merged into the weights.
            self.assign_zeros(self.lora_kernel_b)

    # ---------------------------------------------------------------- cost

    def flops(self, batch_size, query_length, key_length, input_dim):
        """Forward multiply-adds x 2 of the logits, for a cost model.

        The default counts a `B x H x T x S` contraction of width `key_dim`
        for batch-dependent variants and nothing for batch-independent ones
        (a slice of stored logits); variants override it.
        """
        if not self.batch_dependent:
            return 0
        return 2 * batch_size * self.num_heads * query_length * key_length * (
            self.key_dim)


def scaled(x, scale, head_axis):
    """`x` times `scale (H,)` broadcast along `head_axis` of `x`."""
    if scale is None:
        return x
    shape = [1] * len(x.shape)
    shape[head_axis] = -1
    return x * ops.reshape(ops.cast(scale, x.dtype), shape)


def batched_product(left, right):
    """`left @ right` as `(B, H, T, S)`, a batch-independent factor
    broadcast to the other's batch.

    Batched over (b, n), the product comes out as (B, H, T, S): batched over
    heads alone it would come out (H, B, T, S) and need a transpose of the
    largest tensor (forward and backward).
    """
    batch_size = ops.shape(left if len(left.shape) == 4 else right)[0]
    return ops.einsum("bntc,bncs->bnts", to_batch(left, batch_size),
                      to_batch(right, batch_size))


def to_batch(factor, batch_size):
    """`factor` with a leading batch axis: `(H, ., .)` broadcast to
    `(B, H, ., .)`, a `(B, H, ., .)` factor as it is."""
    if len(factor.shape) == 4:
        return factor
    return ops.broadcast_to(
        ops.expand_dims(factor, 0), (batch_size,) + tuple(ops.shape(factor)))
