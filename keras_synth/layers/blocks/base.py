"""Helpers shared by the keras-nlp blocks (`SynthesizerEncoder/Decoder`).

Shared by the two block modules, not exported: their common mixin, masks
merged the way keras-nlp's Transformer blocks merge them, Keras masks
detached while an attention layer runs, early validation of the
synthesizer arguments.
"""

import contextlib

import keras
from keras import ops

from keras_synth.layers.attention.masks import causal_mask
from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.layers.keras_utils import export_format
from keras_synth.layers.keras_utils import get_keras_mask
from keras_synth.layers.keras_utils import set_keras_mask
from keras_synth.layers.attention import SynthesizerAttention
from keras_synth.layers.blocks.token_chunks import check_chunk_size
from keras_synth.layers.blocks.token_chunks import map_token_chunks
from keras_synth.layers.synthesizers import deserialize_options
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.layers.synthesizers import select_options
from keras_synth.layers.synthesizers import serialize_options
from keras_synth.layers.synthesizers import split_options
from keras_synth.layers.synthesizers import variants_of
from keras_synth.layers.synthesizers.legacy import merge_legacy_options
from keras_synth.layers.synthesizers.legacy import pop_legacy_options

def check_synthesizer_arguments(num_heads, synthesizer_kwargs, prefix=""):
    """Raises the layer's own `ValueError` for bad synthesizer arguments.

    Blocks create their attention in `build` (its `key_dim` depends on the
    input width), so a throwaway, never built `SynthesizerAttention` checks
    the arguments when the block is constructed.
    """
    try:
        SynthesizerAttention(num_heads=num_heads, key_dim=1, **synthesizer_kwargs)
    except ValueError as error:
        if not prefix:
            raise
        raise ValueError(f"{prefix}: {error}") from None


@contextlib.contextmanager
def keras_masks_detached(*tensors):
    """Clears the Keras masks of `tensors` inside the block, restores them after.

    The blocks merge Keras masks into explicit attention masks (as keras-nlp
    does), so the attention layer must not pick them up a second time (with
    a cache, a `(B, 1)` query mask would not even match the cache length).
    `SynthesizerAttention`, like `MultiHeadAttention`, clears the masks of
    its inputs; restoring them keeps e.g. the encoder output's mask for the
    next decoder block of a stack.
    """
    saved = [(t, get_keras_mask(t)) for t in tensors if t is not None]
    for tensor, _ in saved:
        set_keras_mask(tensor, None)
    try:
        yield
    finally:
        for tensor, mask in saved:
            if mask is not None:
                set_keras_mask(tensor, mask)


def _check_rank(arg, mask, rank):
    if mask is not None and len(mask.shape) != rank:
        raise ValueError(
            f"Argument `{arg}` should have rank {rank}: "
            + (
                "(batch_size, sequence_length)"
                if rank == 2
                else "(batch_size, target_length, source_length)"
            )
            + f". Received: {arg}.shape={tuple(mask.shape)}"
        )


def attention_mask_arguments(
    inputs,
    padding_mask,
    attention_mask,
    query_length,
    key_length,
    causal=False,
    query_start=0,
    padding_arg="padding_mask",
    attention_arg="attention_mask",
    padding_is_key_mask=True,
):
    """Merges masks as keras-nlp's blocks do, in the attention layer's terms.

    `padding_mask` (or, when it is `None`, the Keras mask of `inputs`) masks
    keys, `(B, 1, S)` after keras-nlp's broadcast; `attention_mask` is
    `(B, T, S)`; both `True` where attention is allowed. With `causal`,
    query row `i` (at position `query_start + i`) sees keys
    `0 .. query_start + i`.

    Returns the keyword arguments `attention_mask`, `value_mask` and
    `use_causal_mask` for `SynthesizerAttention`. With
    `padding_is_key_mask` (the padding mask has the keys' length) padding
    and causal masks stay factored, so that batch-independent synthesizers
    keep `H x T x S` logits where the layer can. Otherwise (a cached
    decoding step, whose padding mask covers the new tokens only) the masks
    are merged into one `(B, T, S)` mask by keras-nlp's broadcasting rules.
    """
    _check_rank(padding_arg, padding_mask, 2)
    _check_rank(attention_arg, attention_mask, 3)
    padding = padding_mask
    if padding is None:
        padding = get_keras_mask(inputs)
    if padding is not None:
        padding = ops.cast(padding, "bool")
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
    if padding_is_key_mask or padding is None:
        return dict(
            attention_mask=attention_mask,
            value_mask=padding,
            use_causal_mask=causal,
        )
    masks = [ops.expand_dims(padding, 1)]
    if attention_mask is not None:
        masks.append(attention_mask)
    if causal:
        masks.append(
            ops.expand_dims(causal_mask(query_length, key_length, query_start), 0)
        )
    merged = masks[0]
    for mask in masks[1:]:
        merged = ops.logical_and(merged, mask)
    batch_size = ops.shape(merged)[0]
    merged = ops.broadcast_to(merged, (batch_size, query_length, key_length))
    return dict(attention_mask=merged, value_mask=None, use_causal_mask=False)


@keras.saving.register_keras_serializable(package="keras_synth")
def exact_gelu(x):
    """Keras's exact GELU (`keras.activations.gelu`), `x * Phi(x)`.

    The backends write it with `erfc`, which ONNX has no operator for
    (tf2onnx fails on TensorFlow's `Erfc`). Traced for an ONNX file
    (`keras_utils.export_format`), it is `x (erf(x / sqrt 2) + 1) / 2`
    instead, the same function to float32 rounding (within 1e-6 on
    [-12, 12]); elsewhere (LiteRT has a GELU of its own) Keras's.
    """
    if export_format() != "onnx":
        return keras.activations.gelu(x)
    x = ops.convert_to_tensor(x)
    return x * (ops.erf(x / 1.4142135623730951) + 1.0) / 2.0


def feedforward_activation(activation):
    """`activation`, with Keras's exact GELU (`"gelu"`) as `exact_gelu`."""
    if activation is not None and (
            keras.activations.get(activation) is keras.activations.gelu):
        return exact_gelu
    return activation


def dense(units, activation, kernel_initializer, bias_initializer, dtype, name):
    return keras.layers.Dense(
        units,
        activation=feedforward_activation(activation),
        kernel_initializer=clone_initializer(kernel_initializer),
        bias_initializer=clone_initializer(bias_initializer),
        dtype=dtype,
        name=name,
    )


class SynthesizerBlockMixin:
    """What `SynthesizerEncoder` and `SynthesizerDecoder` share.

    Mixed in before the keras-nlp block class: the synthesizer arguments
    (attributes, attention keyword arguments, config entries) and the
    sublayers and residual steps of keras-nlp's Transformer blocks. Each
    block keeps its own `build`, so that its sublayers and weights are
    created with keras-nlp's names and in keras-nlp's order.
    """

    def _set_synthesizer_arguments(self, synthesizers, max_length,
                                   synthesizer_options, legacy):
        """Keeps `max_length` and one `synthesizer_options` mapping for all
        the block's attention layers (`synthesizers`: their variant specs),
        release 0.1's option arguments `legacy` (`pop_legacy_arguments`)
        merged in; raises for an option that none of the variants has."""
        variants = variants_of(synthesizers)
        self.max_length = max_length
        self.synthesizer_options = merge_legacy_options(
            legacy, variants, synthesizer_options, owner=type(self).__name__)
        if all(variants_of([spec]) for spec in synthesizers):
            split_options(tuple(sorted(variants)), self.synthesizer_options)

    def _set_feedforward_chunk_size(self, feedforward_chunk_size):
        check_chunk_size(feedforward_chunk_size)
        self.feedforward_chunk_size = feedforward_chunk_size

    def _synthesizer_kwargs(self, synthesizer):
        return dict(
            synthesizer=synthesizer,
            max_length=self.max_length,
            synthesizer_options=select_options(
                parse_synthesizer(synthesizer), self.synthesizer_options),
        )

    def _synthesizer_config(self):
        """The config entries of the synthesizer arguments but the variants."""
        return {
            "max_length": self.max_length,
            "synthesizer_options": serialize_options(self.synthesizer_options),
            "feedforward_chunk_size": self.feedforward_chunk_size,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        variants = variants_of([config.get("synthesizer", "dense"),
                                config.get("cross_attention_synthesizer",
                                           "vanilla")])
        # Release 0.1's configs carry its option keys: no warning for them.
        config["synthesizer_options"] = pop_legacy_options(
            config, variants,
            deserialize_options(config.get("synthesizer_options")),
            warn=False)
        return cls(**config)

    def _head_dim(self, hidden_dim, name):
        """`hidden_dim // num_heads`, keras-nlp's error when it is zero."""
        head_dim = int(hidden_dim // self.num_heads)
        if head_dim == 0:
            raise ValueError(
                f"Attention `{name}` computed cannot be zero. "
                f"The `hidden_dim` value of {hidden_dim} has to be equal to "
                f"or greater than `num_heads` value of {self.num_heads}."
            )
        return head_dim

    def _attention(self, name, synthesizer, key_dim, **kwargs):
        return SynthesizerAttention(
            num_heads=self.num_heads,
            key_dim=key_dim,
            dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
            **kwargs,
            **self._synthesizer_kwargs(synthesizer),
        )

    def _layer_norm(self, name, shape):
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(shape)
        return layer

    def _dropout(self, name):
        return keras.layers.Dropout(
            rate=self.dropout, dtype=self.dtype_policy, name=name
        )

    def _build_feedforward_denses(self, shape):
        """Creates and builds keras-nlp's two feedforward `Dense` layers."""
        self._feedforward_intermediate_dense = dense(
            self.intermediate_dim,
            self.activation,
            self.kernel_initializer,
            self.bias_initializer,
            self.dtype_policy,
            "feedforward_intermediate_dense",
        )
        self._feedforward_intermediate_dense.build(shape)
        self._feedforward_output_dense = dense(
            shape[-1],
            None,
            self.kernel_initializer,
            self.bias_initializer,
            self.dtype_policy,
            "feedforward_output_dense",
        )
        intermediate_shape = list(shape)
        intermediate_shape[-1] = self.intermediate_dim
        self._feedforward_output_dense.build(tuple(intermediate_shape))

    def _pre_norm(self, x, layer_norm):
        """The sublayer's input: normalized with `normalize_first` (pre-LN)."""
        return layer_norm(x) if self.normalize_first else x

    def _add_residual(self, x, residual, dropout, layer_norm, training):
        """Dropout, residual, and the post-LN normalization of a sublayer."""
        x = dropout(x, training=training)
        x = x + residual
        if not self.normalize_first:
            x = layer_norm(x)
        return x

    def _attention_sublayer(
        self, x, attention, layer_norm, dropout, source, training,
        value=None, returns_pair=False, feedforward=False,
        **attention_kwargs,
    ):
        """An attention sublayer of keras-nlp's blocks with its residual.

        `source` is the block input whose Keras mask went into
        `attention_kwargs` (detached while `attention` runs); `value` the
        attended sequence (default: the normalized `x`, self-attention).
        With `feedforward` (the block's last attention sublayer), the
        feedforward sublayer follows the residual step, both over chunks
        of `feedforward_chunk_size` tokens. Returns `(outputs, second)`,
        where `second` is the attention's second output (scores or cache)
        with `returns_pair`, else `None`.
        """
        residual = x
        x = self._pre_norm(x, layer_norm)
        with keras_masks_detached(source, x):
            outputs = attention(
                query=x,
                value=x if value is None else value,
                training=training,
                **attention_kwargs,
            )
        second = None
        if returns_pair:
            outputs, second = outputs

        def residual_step(outputs, residual):
            x = self._add_residual(outputs, residual, dropout, layer_norm,
                                   training)
            return self._feedforward(x, training) if feedforward else x

        if not feedforward:
            return residual_step(outputs, residual), second
        dropouts = (dropout, self._feedforward_dropout)
        # The weights the chunks read (not the attention's: as inputs of
        # every chunk they would only add zero gradients).
        sublayers = (layer_norm, self._feedforward_layer_norm,
                     self._feedforward_intermediate_dense,
                     self._feedforward_output_dense)
        return map_token_chunks(
            residual_step, self.feedforward_chunk_size, outputs, residual,
            variables=[w for layer in sublayers for w in layer.weights],
            seed_generators=[d.seed_generator for d in dropouts if d.rate],
        ), second

    def _feedforward(self, x, training):
        """keras-nlp's feedforward sublayer with its residual connection."""
        residual = x
        x = self._pre_norm(x, self._feedforward_layer_norm)
        x = self._feedforward_intermediate_dense(x)
        x = self._feedforward_output_dense(x)
        return self._add_residual(
            x, residual, self._feedforward_dropout,
            self._feedforward_layer_norm, training,
        )
