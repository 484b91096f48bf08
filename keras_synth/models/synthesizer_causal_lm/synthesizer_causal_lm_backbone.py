"""`SynthesizerCausalLMBackbone`: a decoder-only stack of `SynthesizerDecoder`."""

import keras

from keras_synth.models.preset_utils import load_preset
from keras_synth.layers import SynthesizerDecoder
from keras_synth._hub import keras_hub
from keras_synth.models import generation_utils as utils
from keras_synth.models.backbone_utils import ConfigAttributesMixin
from keras_synth.models.backbone_utils import check_backbone_sizes
from keras_synth.models.backbone_utils import synthesizer_options_argument
from keras_synth.models.layout_map import LayoutMapMixin
from keras_synth.models.lora_targets import LoraTargetsMixin
from keras_synth.models.quantization import QuietQuantizeMixin


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerCausalLMBackbone(
    LayoutMapMixin, LoraTargetsMixin, QuietQuantizeMixin,
    ConfigAttributesMixin, keras_hub.models.Backbone,
):
    """Decoder-only Transformer with causal synthesized self-attention.

    GPT-2's layout: token embeddings plus learned position embeddings,
    `num_layers` `SynthesizerDecoder` blocks without cross-attention (pre-LN
    by default) and a final layer normalization. With
    `synthesizer="vanilla"` it computes what a keras-hub `GPT2Backbone` of
    the same sizes computes (with `activation` GPT-2's approximate gelu).

    Args:
        vocabulary_size: int, the number of tokens.
        num_layers: int, the number of decoder blocks.
        num_heads: int, attention heads per block.
        hidden_dim: int, the width of the blocks.
        intermediate_dim: int, the feedforward width.
        max_sequence_length: int, the longest sequence (positions and the
            synthesizers' `max_length`).
        synthesizer: variant of the causal self-attention (see
            `keras_synth.layers.SynthesizerAttention`). Defaults to
            `"dense"`.
        dropout: float, dropout of the embeddings and blocks. Defaults to 0.1.
        activation: activation of the feedforward networks. Defaults to
            `"gelu"`.
        normalize_first: bool, pre-LN blocks and a final layer normalization
            (True, default) or post-LN blocks (False, no final norm).
        layer_norm_epsilon: float. Defaults to `1e-5`.
        synthesizer_options: dict of the variants' options, as
            `SynthesizerAttention`'s (e.g. `{"rank": 4}` for
            `"factorized_random"`, `{"initializer": "zeros"}` for the
            random variants), for every block. (Release 0.1's one argument
            per option still works, deprecated.)
        feedforward_chunk_size: int or `None` (default): every block's
            feedforward over chunks of this many tokens, rematerialised
            (the blocks' argument: less memory at long lengths, the same
            outputs).
        dtype: dtype policy of the layers.
        **kwargs: base `keras.Model` arguments (`name`, ...).

    Call arguments:
        inputs: dict with `token_ids` and `padding_mask`, both
            `(batch, length)`.

    Returns:
        `(batch, length, hidden_dim)` hidden states.

    Example:

    >>> import numpy as np
    >>> backbone = SynthesizerCausalLMBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=32, max_sequence_length=12, synthesizer="random")
    >>> x = {"token_ids": np.ones((2, 12), "int32"),
    ...      "padding_mask": np.ones((2, 12), "int32")}
    >>> tuple(backbone(x).shape)
    (2, 12, 16)
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
        dropout=0.1,
        activation="gelu",
        normalize_first=True,
        layer_norm_epsilon=1e-5,
        synthesizer_options=None,
        feedforward_chunk_size=None,
        dtype=None,
        **kwargs,
    ):
        synthesizer_options = synthesizer_options_argument(
            kwargs, [synthesizer], synthesizer_options, type(self).__name__)
        check_backbone_sizes(
            vocabulary_size=vocabulary_size, num_layers=num_layers,
            num_heads=num_heads, hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length)
        # === Layers ===
        self.token_embedding = utils.reversible_embedding(
            vocabulary_size, hidden_dim, dtype, "token_embedding"
        )
        self.position_embedding = keras_hub.layers.PositionEmbedding(
            sequence_length=max_sequence_length,
            dtype=dtype,
            name="position_embedding",
        )
        self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            SynthesizerDecoder(
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
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.layer_norm = (
            keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm"
            )
            if normalize_first
            else None
        )

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(
            shape=(None,), dtype="int32", name="padding_mask"
        )
        x = self.embed(token_ids)
        for layer in self.transformer_layers:
            x = layer(x, decoder_padding_mask=padding_mask)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs=x,
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
            dropout=dropout,
            activation=activation,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            synthesizer_options=synthesizer_options,
            feedforward_chunk_size=feedforward_chunk_size,
        )

    @classmethod
    def from_preset(cls, preset, **kwargs):
        return load_preset(
            cls, preset,
            lambda: super(SynthesizerCausalLMBackbone, cls).from_preset(
                preset, **kwargs),
            expected_backbone=cls,
        )

    def embed(self, token_ids, start_index=0, training=None):
        """Token plus position embeddings of tokens from `start_index` on."""
        tokens = self.token_embedding(token_ids)
        positions = utils.positions(self.position_embedding, tokens,
                                    start_index)
        x = self.embeddings_add((tokens, positions))
        return self.embeddings_dropout(x, training=training)
