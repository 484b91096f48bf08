"""`SynthesizerDecoder`: keras-nlp's `TransformerDecoder` with synthesized attention."""

import keras
from keras import ops

from keras_synth._hub import keras_hub
from keras_synth.layers.blocks import base as utils
from keras_synth.layers.keras_utils import with_quantized_dtype
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.layers.synthesizers.legacy import pop_legacy_arguments


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerDecoder(
    utils.SynthesizerBlockMixin, keras_hub.layers.TransformerDecoder
):
    """Transformer decoder block with causal synthesized self-attention.

    A drop-in for `keras_hub.layers.TransformerDecoder` (and an instance of
    it): same constructor arguments, same call signature (caches included),
    same sublayers and weight names. The causal self-attention is a
    `keras_synth.layers.SynthesizerAttention` of variant `synthesizer`; the
    cross-attention over the encoder sequence is ordinary dot-product
    attention by default, as in the paper, and any variant with
    `cross_attention_synthesizer`. Called with one input, the block has no
    cross-attention (decoder-only models such as GPT-2).

    The block owns exactly the weights it uses (its attention layers are
    created in `build` in place of keras-nlp's, never next to them).

    Cached decoding: `self_attention_cache` and `cross_attention_cache`
    work as in keras-nlp, except that their layout depends on the variant:
    pure synthesizers need no keys, so their cache holds values only,
    `(batch, 1, length, num_heads, head_dim)`, half the memory of the
    key/value cache `(batch, 2, length, num_heads, head_dim)` that variants
    with a dot-product part (`"vanilla"`, `"random+vanilla"`, ...) keep.
    A pure synthesizer also accepts keras-hub's key/value layout (code
    written for keras-hub's caches runs unchanged): its key slot is left
    untouched and the cache keeps that layout. Build empty caches with
    `initial_cache(batch_size, max_length)` and
    `initial_cross_attention_cache(batch_size, encoder_length)`. A decoding
    step at position `t` uses row `t` of the synthesized logits (in both
    attention layers), so step-by-step decoding reproduces the full causal
    forward pass.

    Args:
        intermediate_dim: int, the hidden size of the feedforward network.
        num_heads: int, the number of attention heads.
        dropout: float, dropout of the attention probabilities, of the
            attention outputs and of the feedforward network. Defaults to 0.
        activation: activation of the feedforward network. Defaults to
            `"relu"`.
        layer_norm_epsilon: float. Defaults to `1e-5`.
        kernel_initializer: initializer of the kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer of the biases. Defaults to `"zeros"`.
        normalize_first: bool, pre-LN (True) or post-LN (False, default).
        synthesizer: variant of the causal self-attention (see
            `SynthesizerAttention`). Defaults to `"dense"`.
        cross_attention_synthesizer: variant of the cross-attention.
            Defaults to `"vanilla"` (dot-product attention, as in the paper).
        max_length: int, the longest decoder (and, for a synthetic
            cross-attention, encoder) sequence `ℓ`. Required by synthetic
            variants.
        synthesizer_options: dict of the variants' options, as
            `SynthesizerAttention`'s (e.g. `{"rank": 4}`), for every
            attention layer of the block. (Release 0.1's one argument per
            option still works, deprecated.)
        feedforward_chunk_size: int or `None` (default): run the
            feedforward sublayer, with the residual step before it, over
            chunks of this many tokens (batch x length), each
            rematerialised in the backward pass, so that its intermediate
            activations exist for one chunk at a time. The same outputs
            and gradients, less memory at long lengths (for
            `factorized_random`, twice the trainable length in the same
            memory), a little more compute.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(batch, T, hidden_dim)` tensor.
        encoder_sequence: optional `(batch, S, hidden_dim)` tensor; leave
            `None` for decoder-only models. The number of inputs may not
            change between calls.
        decoder_padding_mask: optional boolean `(batch, T)` mask (default:
            the Keras mask of `decoder_sequence`).
        decoder_attention_mask: optional boolean `(batch, T, T)` mask.
        encoder_padding_mask: optional boolean `(batch, S)` mask (default:
            the Keras mask of `encoder_sequence`).
        encoder_attention_mask: optional boolean `(batch, T, S)` mask.
        self_attention_cache: optional self-attention cache, shaped as
            `initial_cache` returns.
        self_attention_cache_update_index: int or int tensor: the position
            of the first token of `decoder_sequence`, where its values (and
            keys) are written into the cache.
        cross_attention_cache: optional cross-attention cache, shaped as
            `initial_cross_attention_cache` returns.
        cross_attention_cache_update_index: `0` to fill the cross-attention
            cache from `encoder_sequence`, `None` to reuse it.
        use_causal_mask: whether the self-attention is causal. Defaults to
            True.
        training: whether dropout is active.

    Returns:
        `outputs`, shaped like `decoder_sequence`, without caches;
        `(outputs, self_attention_cache)` with a cache and no
        cross-attention; `(outputs, self_attention_cache,
        cross_attention_cache)` with caches and cross-attention.

    Example:

    >>> import numpy as np
    >>> decoder = SynthesizerDecoder(
    ...     intermediate_dim=64, num_heads=4, synthesizer="random",
    ...     max_length=16)
    >>> x = np.random.rand(2, 10, 32).astype("float32")
    >>> y = decoder(x)  # decoder-only, causal
    >>> cache = decoder.initial_cache(batch_size=2, max_length=16)
    >>> tuple(cache.shape)  # values only: no keys for a pure synthesizer
    (2, 1, 16, 4, 8)
    >>> y0, cache = decoder(x[:, :1], self_attention_cache=cache,
    ...                     self_attention_cache_update_index=0)
    """

    def __init__(
        self,
        intermediate_dim,
        num_heads,
        dropout=0,
        activation="relu",
        layer_norm_epsilon=1e-05,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        normalize_first=False,
        synthesizer="dense",
        cross_attention_synthesizer="vanilla",
        max_length=None,
        synthesizer_options=None,
        feedforward_chunk_size=None,
        **kwargs,
    ):
        # As keras-nlp: a config carries the build shapes, so that a restored
        # layer is built (and its weights can be loaded) right away.
        decoder_sequence_shape = kwargs.pop("decoder_sequence_shape", None)
        encoder_sequence_shape = kwargs.pop("encoder_sequence_shape", None)
        legacy = pop_legacy_arguments(kwargs)
        super().__init__(
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            normalize_first=normalize_first,
            **kwargs,
        )
        self._set_synthesizer_arguments(
            [synthesizer, cross_attention_synthesizer], max_length, synthesizer_options, legacy)
        self._set_feedforward_chunk_size(feedforward_chunk_size)
        self.synthesizer = "+".join(parse_synthesizer(synthesizer))
        self.cross_attention_synthesizer = "+".join(
            parse_synthesizer(cross_attention_synthesizer)
        )
        utils.check_synthesizer_arguments(
            num_heads, self._synthesizer_kwargs(self.synthesizer)
        )
        utils.check_synthesizer_arguments(
            num_heads,
            self._synthesizer_kwargs(self.cross_attention_synthesizer),
            prefix="Cross-attention "
            f"(cross_attention_synthesizer={cross_attention_synthesizer!r})",
        )
        if decoder_sequence_shape:
            self.build(decoder_sequence_shape, encoder_sequence_shape)

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        # keras-nlp's build with our attention layers (no `super().build()`:
        # it would create unused `CachedMultiHeadAttention` weights). The
        # build shapes go into our own config (see `get_config`), not into
        # keras-nlp's private attributes.
        self._build_shapes = (decoder_sequence_shape, encoder_sequence_shape)
        head_dim = self._head_dim(decoder_sequence_shape[-1], "head_dim")
        self._self_attention_layer = self._attention(
            "self_attention", self.synthesizer, head_dim, value_dim=head_dim
        )
        self._self_attention_layer.build(
            decoder_sequence_shape, decoder_sequence_shape
        )
        self._self_attention_layer_norm = self._layer_norm(
            "self_attention_layer_norm", decoder_sequence_shape
        )
        self._self_attention_dropout = self._dropout("self_attention_dropout")

        self._cross_attention_layer = None
        if encoder_sequence_shape:
            self._cross_attention_layer = self._attention(
                "cross_attention",
                self.cross_attention_synthesizer,
                head_dim,
                value_dim=head_dim,
            )
            self._cross_attention_layer.build(
                decoder_sequence_shape, encoder_sequence_shape
            )
            self._cross_attention_layer_norm = self._layer_norm(
                "cross_attention_layer_norm", decoder_sequence_shape
            )
            self._cross_attention_dropout = self._dropout(
                "cross_attention_dropout"
            )

        self._build_feedforward_denses(decoder_sequence_shape)
        self._feedforward_layer_norm = self._layer_norm(
            "feedforward_layer_norm", decoder_sequence_shape
        )
        self._feedforward_dropout = self._dropout("feedforward_dropout")
        self.built = True

    # ---------------------------------------------------------------- API

    @property
    def self_attention(self):
        """The causal self-attention `SynthesizerAttention` (after `build`)."""
        return getattr(self, "_self_attention_layer", None)

    @property
    def cross_attention(self):
        """The cross-attention `SynthesizerAttention`, or `None`."""
        return getattr(self, "_cross_attention_layer", None)

    def _require_built(self, method):
        if not self.built:
            raise ValueError(
                f"`{method}` needs a built layer (the cache shape depends on "
                "the input width): call the layer once or call "
                "`build(decoder_sequence_shape, encoder_sequence_shape)` "
                "first."
            )

    def initial_cache(self, batch_size, max_length=None, dtype=None):
        """Returns an empty self-attention cache for `max_length` positions.

        `(batch_size, 1, max_length, num_heads, head_dim)` (values only) for
        a pure synthesizer, `(batch_size, 2, max_length, num_heads,
        head_dim)` (keys and values) when the self-attention has a
        dot-product part. `max_length` defaults to the layer's.
        """
        self._require_built("initial_cache")
        return self._self_attention_layer.initial_cache(
            batch_size, max_length, dtype=dtype
        )

    def initial_cross_attention_cache(
        self, batch_size, encoder_length, dtype=None
    ):
        """Returns an empty cross-attention cache for `encoder_length` keys.

        Fill it on the first decoding step with
        `cross_attention_cache_update_index=0` and reuse it afterwards with
        `cross_attention_cache_update_index=None`. Values only for a
        synthetic cross-attention, keys and values for a dot-product one.
        """
        self._require_built("initial_cross_attention_cache")
        if self._cross_attention_layer is None:
            raise ValueError(
                "This SynthesizerDecoder was built without cross-attention "
                "(called without `encoder_sequence`), so it has no "
                "cross-attention cache."
            )
        return self._cross_attention_layer.initial_cache(
            batch_size, encoder_length, dtype=dtype
        )

    # ---------------------------------------------------------------- call

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
    ):
        has_cross_attention = self._cross_attention_layer is not None
        if has_cross_attention != (encoder_sequence is not None):
            raise ValueError(
                "The number of call arguments to `SynthesizerDecoder` "
                "should not change. Use `layer(decoder_sequence, "
                "encoder_sequence)` to build a layer with cross attention, or "
                "`layer(decoder_sequence)` to build a layer without. This "
                "layer has been built "
                + ("with" if has_cross_attention else "without")
                + " cross attention, but was called "
                + ("without" if has_cross_attention else "with")
                + " `encoder_sequence`."
            )
        has_self_cache = self_attention_cache is not None
        if has_cross_attention and (
            has_self_cache != (cross_attention_cache is not None)
        ):
            raise ValueError(
                "When calling `SynthesizerDecoder` with cross-attention, "
                "`self_attention_cache` and `cross_attention_cache` should "
                "both be set or both be `None`. Received: "
                f"self_attention_cache={self_attention_cache}, "
                f"cross_attention_cache={cross_attention_cache}."
            )
        if not has_self_cache and self_attention_cache_update_index is not None:
            raise ValueError(
                "`self_attention_cache_update_index` should not be set if "
                "`self_attention_cache` is `None`. Received: "
                "self_attention_cache_update_index="
                f"{self_attention_cache_update_index}"
            )
        query_start = (
            0
            if self_attention_cache_update_index is None
            else self_attention_cache_update_index
        )
        query_length = ops.shape(decoder_sequence)[1]
        key_length = (
            ops.shape(self_attention_cache)[2] if has_self_cache else query_length
        )
        self_masks = utils.attention_mask_arguments(
            decoder_sequence,
            decoder_padding_mask,
            decoder_attention_mask,
            query_length,
            key_length,
            causal=use_causal_mask,
            query_start=query_start,
            padding_arg="decoder_padding_mask",
            attention_arg="decoder_attention_mask",
            # With a cache, the padding mask covers the new tokens only.
            padding_is_key_mask=not has_self_cache,
        )

        self_attention_cache, self_key_slot = _values_only(
            self._self_attention_layer, self_attention_cache
        )
        # Without a cache, the second output is `None`, as the cache.
        x, self_attention_cache = self._attention_sublayer(
            decoder_sequence,
            self._self_attention_layer,
            self._self_attention_layer_norm,
            self._self_attention_dropout,
            decoder_sequence,
            training,
            returns_pair=has_self_cache,
            feedforward=not has_cross_attention,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
            query_start_index=query_start,
            **self_masks,
        )

        if has_cross_attention:
            encoder_length = (
                ops.shape(cross_attention_cache)[2]
                if cross_attention_cache is not None
                else ops.shape(encoder_sequence)[1]
            )
            cross_masks = utils.attention_mask_arguments(
                encoder_sequence,
                encoder_padding_mask,
                encoder_attention_mask,
                query_length,
                encoder_length,
                padding_arg="encoder_padding_mask",
                attention_arg="encoder_attention_mask",
            )
            cross_attention_cache, cross_key_slot = _values_only(
                self._cross_attention_layer, cross_attention_cache
            )
            x, cross_attention_cache = self._attention_sublayer(
                x,
                self._cross_attention_layer,
                self._cross_attention_layer_norm,
                self._cross_attention_dropout,
                encoder_sequence,
                training,
                value=encoder_sequence,
                returns_pair=cross_attention_cache is not None,
                feedforward=True,
                cache=cross_attention_cache,
                cache_update_index=cross_attention_cache_update_index,
                # Decoder position of the query row: row t of the
                # logits of a synthetic cross-attention.
                query_start_index=query_start,
                **cross_masks,
            )

        if has_self_cache:
            self_attention_cache = _with_key_slot(
                self_attention_cache, self_key_slot
            )
            if has_cross_attention:
                cross_attention_cache = _with_key_slot(
                    cross_attention_cache, cross_key_slot
                )
                return x, self_attention_cache, cross_attention_cache
            return x, self_attention_cache
        return x

    def get_config(self):
        config = super().get_config()
        config["synthesizer"] = self.synthesizer
        config["cross_attention_synthesizer"] = self.cross_attention_synthesizer
        config.update(self._synthesizer_config())
        # A config carries the build shapes (popped again by `__init__`), so
        # that a restored block is built and its weights load.
        shapes = getattr(self, "_build_shapes", (None, None))
        config["decoder_sequence_shape"] = shapes[0]
        config["encoder_sequence_shape"] = shapes[1]
        return with_quantized_dtype(self, config)


def _values_only(attention, cache):
    """keras-hub's `(batch, 2, length, heads, head_dim)` cache layout for an
    attention without keys: returns the value slot and the key slot (left
    untouched, put back by `_with_key_slot`). Other caches pass as they are.
    """
    if cache is None or attention.uses_keys or cache.shape[1] != 2:
        return cache, None
    return cache[:, 1:], cache[:, :1]


def _with_key_slot(cache, key_slot):
    if key_slot is None:
        return cache
    return ops.concatenate([key_slot, cache], axis=1)
