"""`SynthesizerSeq2SeqBackbone`: a Synthesizer encoder-decoder Transformer."""

import keras
from keras import ops

from keras_synth.models.preset_utils import load_preset
from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from keras_synth._hub import keras_hub
from keras_synth.models import generation_utils as utils
from keras_synth.models.backbone_utils import ConfigAttributesMixin
from keras_synth.models.backbone_utils import check_backbone_sizes
from keras_synth.models.backbone_utils import synthesizer_options_argument
from keras_synth.models.layout_map import LayoutMapMixin
from keras_synth.models.lora_targets import LoraTargetsMixin
from keras_synth.models.quantization import QuietQuantizeMixin


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerSeq2SeqBackbone(
    LayoutMapMixin, LoraTargetsMixin, QuietQuantizeMixin,
    ConfigAttributesMixin, keras_hub.models.Backbone,
):
    """Encoder-decoder Transformer of `SynthesizerEncoder`/`Decoder` blocks.

    One token embedding (a shared vocabulary) serves the encoder, the
    decoder and, tied, the output projection; with `encoder_vocabulary_size`
    the encoder gets an embedding of its own (a source vocabulary apart from
    the target's, which stays tied to the output). Token embeddings are
    scaled by
    `sqrt(hidden_dim)` and added to learned position embeddings (one table
    for each side). `num_layers` encoder blocks synthesize their
    self-attention with `synthesizer`; `num_layers` decoder blocks
    synthesize their causal self-attention with it too, and attend to the
    encoder output with `cross_attention_synthesizer` (ordinary dot-product
    attention by default, as in the paper). With `normalize_first`, pre-LN
    blocks and a final layer normalization on each side.

    Args:
        vocabulary_size: int, the number of tokens of the decoder and the
            output (and of the encoder, unless `encoder_vocabulary_size`).
        num_layers: int, the number of blocks in the encoder and in the
            decoder.
        num_heads: int, attention heads per block.
        hidden_dim: int, the width of the blocks.
        intermediate_dim: int, the feedforward width.
        max_sequence_length: int, the longest encoder or decoder sequence
            (positions and the synthesizers' `max_length`).
        synthesizer: self-attention variant (see
            `keras_synth.layers.SynthesizerAttention`). Defaults to
            `"dense"`.
        cross_attention_synthesizer: cross-attention variant. Defaults to
            `"vanilla"`.
        dropout: float. Defaults to 0.1.
        activation: feedforward activation. Defaults to `"relu"`.
        normalize_first: bool, pre-LN (True) or post-LN (False, default).
        layer_norm_epsilon: float. Defaults to `1e-5`.
        synthesizer_options: dict of the variants' options, as
            `SynthesizerAttention`'s (e.g. `{"rank": 4}` for
            `"factorized_random"`, `{"initializer": "zeros"}` for the
            random variants), for every block. (Release 0.1's one argument
            per option still works, deprecated.)
        encoder_vocabulary_size: int or `None` (default): the number of
            source tokens when the source has a vocabulary of its own
            (`SynthesizerSeq2SeqLMPreprocessor(encoder_tokenizer=...)`);
            `None` shares the decoder's embedding.
        feedforward_chunk_size: int or `None` (default): every block's
            feedforward over chunks of this many tokens, rematerialised
            (the blocks' argument: less memory at long lengths, the same
            outputs).
        dtype: dtype policy of the layers.
        **kwargs: base `keras.Model` arguments (`name`, ...).

    Call arguments:
        inputs: dict of `encoder_token_ids`, `encoder_padding_mask`
            `(batch, S)`, `decoder_token_ids`, `decoder_padding_mask`
            `(batch, T)`.

    Returns:
        dict of `encoder_sequence_output` `(batch, S, hidden_dim)` and
        `decoder_sequence_output` `(batch, T, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> backbone = SynthesizerSeq2SeqBackbone(
    ...     vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=32, max_sequence_length=10, synthesizer="random")
    >>> ids, mask = np.ones((2, 10), "int32"), np.ones((2, 10), "int32")
    >>> out = backbone({"encoder_token_ids": ids, "encoder_padding_mask": mask,
    ...                 "decoder_token_ids": ids, "decoder_padding_mask": mask})
    >>> tuple(out["decoder_sequence_output"].shape)
    (2, 10, 16)
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length,
        synthesizer="dense",
        cross_attention_synthesizer="vanilla",
        dropout=0.1,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        synthesizer_options=None,
        encoder_vocabulary_size=None,
        feedforward_chunk_size=None,
        dtype=None,
        **kwargs,
    ):
        synthesizer_options = synthesizer_options_argument(
            kwargs, [synthesizer, cross_attention_synthesizer],
            synthesizer_options, type(self).__name__)
        check_backbone_sizes(
            vocabulary_size=vocabulary_size, num_layers=num_layers,
            num_heads=num_heads, hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length)
        if encoder_vocabulary_size is not None and (
            not isinstance(encoder_vocabulary_size, int)
            or encoder_vocabulary_size < 1
        ):
            raise ValueError(
                "Argument `encoder_vocabulary_size` must be a positive int "
                "(a source vocabulary of its own) or None (the decoder's "
                "embedding is shared). Received: "
                f"encoder_vocabulary_size={encoder_vocabulary_size!r}"
            )
        # === Layers ===
        self.token_embedding = utils.reversible_embedding(
            vocabulary_size, hidden_dim, dtype, "token_embedding"
        )
        self.encoder_token_embedding = None
        if encoder_vocabulary_size is not None:
            self.encoder_token_embedding = keras.layers.Embedding(
                encoder_vocabulary_size,
                hidden_dim,
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=hidden_dim**-0.5
                ),
                dtype=dtype,
                name="encoder_token_embedding",
            )
        self.encoder_position_embedding = keras_hub.layers.PositionEmbedding(
            sequence_length=max_sequence_length,
            dtype=dtype,
            name="encoder_position_embedding",
        )
        self.decoder_position_embedding = keras_hub.layers.PositionEmbedding(
            sequence_length=max_sequence_length,
            dtype=dtype,
            name="decoder_position_embedding",
        )
        self.encoder_embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="encoder_embeddings_dropout"
        )
        self.decoder_embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="decoder_embeddings_dropout"
        )
        block = dict(
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            normalize_first=normalize_first,
            synthesizer=synthesizer,
            max_length=max_sequence_length,
            synthesizer_options=synthesizer_options,
            feedforward_chunk_size=feedforward_chunk_size,
            dtype=dtype,
        )
        self.encoder_transformer_layers = [
            SynthesizerEncoder(name=f"encoder_transformer_layer_{i}", **block)
            for i in range(num_layers)
        ]
        self.decoder_transformer_layers = [
            SynthesizerDecoder(
                cross_attention_synthesizer=cross_attention_synthesizer,
                name=f"decoder_transformer_layer_{i}",
                **block,
            )
            for i in range(num_layers)
        ]
        self.encoder_layer_norm = self.decoder_layer_norm = None
        if normalize_first:
            self.encoder_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="encoder_layer_norm"
            )
            self.decoder_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="decoder_layer_norm"
            )

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in (
                "encoder_token_ids",
                "encoder_padding_mask",
                "decoder_token_ids",
                "decoder_padding_mask",
            )
        }
        encoder_output = self.encode(
            inputs["encoder_token_ids"], inputs["encoder_padding_mask"]
        )
        decoder_output = self.decode(
            inputs["decoder_token_ids"],
            encoder_output,
            inputs["encoder_padding_mask"],
            decoder_padding_mask=inputs["decoder_padding_mask"],
        )
        super().__init__(
            inputs=inputs,
            outputs={
                "encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self._set_config(
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
            synthesizer=synthesizer,
            cross_attention_synthesizer=cross_attention_synthesizer,
            dropout=dropout,
            activation=activation,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            synthesizer_options=synthesizer_options,
            encoder_vocabulary_size=encoder_vocabulary_size,
            feedforward_chunk_size=feedforward_chunk_size,
        )

    @classmethod
    def from_preset(cls, preset, **kwargs):
        return load_preset(
            cls, preset,
            lambda: super(SynthesizerSeq2SeqBackbone, cls).from_preset(
                preset, **kwargs),
            expected_backbone=cls,
        )

    def encode(self, token_ids, padding_mask, training=None):
        """The encoder output `(batch, S, hidden_dim)`."""
        embedding = self.encoder_token_embedding
        if embedding is None:
            embedding = self.token_embedding
        x = utils.embed(
            embedding,
            self.encoder_position_embedding,
            token_ids,
            scale=True,
        )
        x = self.encoder_embeddings_dropout(x, training=training)
        for layer in self.encoder_transformer_layers:
            x = layer(x, padding_mask=padding_mask, training=training)
        if self.encoder_layer_norm is not None:
            x = self.encoder_layer_norm(x)
        return x

    def decode(
        self,
        token_ids,
        encoder_output,
        encoder_padding_mask,
        decoder_padding_mask=None,
        self_attention_caches=None,
        cross_attention_caches=None,
        cache_update_index=None,
        fill_cross_attention_caches=False,
        training=None,
    ):
        """The decoder output, without caches or with a cache per block.

        With caches, `token_ids` are the tokens at `cache_update_index ...`
        and the updated caches are returned too: `(outputs,
        self_attention_caches, cross_attention_caches)`. The cross-attention
        caches are filled from `encoder_output` when
        `fill_cross_attention_caches`, reused otherwise.
        """
        start = 0 if cache_update_index is None else cache_update_index
        x = utils.embed(
            self.token_embedding,
            self.decoder_position_embedding,
            token_ids,
            scale=True,
            start_index=start,
        )
        x = self.decoder_embeddings_dropout(x, training=training)
        encoder_padding_mask = ops.cast(encoder_padding_mask, "bool")
        if self_attention_caches is None:
            for layer in self.decoder_transformer_layers:
                x = layer(
                    x,
                    encoder_output,
                    decoder_padding_mask=decoder_padding_mask,
                    encoder_padding_mask=encoder_padding_mask,
                    training=training,
                )
            return self._final_norm(x)
        x, self_attention_caches, cross_attention_caches = (
            utils.decode_with_caches(
                self.decoder_transformer_layers,
                x,
                self_attention_caches,
                cache_update_index,
                encoder_sequence=encoder_output,
                cross_attention_caches=cross_attention_caches,
                fill_cross_attention_caches=fill_cross_attention_caches,
                encoder_padding_mask=encoder_padding_mask,
                training=training,
            )
        )
        return (
            self._final_norm(x), self_attention_caches, cross_attention_caches
        )

    def _final_norm(self, x):
        if self.decoder_layer_norm is not None:
            x = self.decoder_layer_norm(x)
        return x
