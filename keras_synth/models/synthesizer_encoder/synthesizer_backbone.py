"""`SynthesizerBackbone`: a Transformer encoder of `SynthesizerEncoder` blocks."""

import keras
from keras_synth._hub import keras_hub

from keras_synth.layers import SynthesizerEncoder
from keras_synth.models.backbone_utils import ConfigAttributesMixin
from keras_synth.models.backbone_utils import check_backbone_sizes
from keras_synth.models.backbone_utils import synthesizer_options_argument
from keras_synth.models.layout_map import LayoutMapMixin
from keras_synth.models.lora_targets import LoraTargetsMixin
from keras_synth.models.quantization import QuietQuantizeMixin
from keras_synth.models.preset_utils import load_preset

POOLINGS = ("mean", "cls", "cls_dense")


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerBackbone(LayoutMapMixin, LoraTargetsMixin,
                          QuietQuantizeMixin, ConfigAttributesMixin,
                          keras_hub.models.Backbone):
    """Transformer encoder whose self-attention is a Synthesizer.

    Token + position (+ segment) embeddings, layer normalization and
    dropout, then `num_layers` `keras_synth.layers.SynthesizerEncoder`
    blocks (post-LN). Outputs `sequence_output` `(batch, length,
    hidden_dim)` and `pooled_output` `(batch, hidden_dim)`: the mean over
    the tokens of `padding_mask` (`pooling="mean"`), the first (`[CLS]`)
    token (`pooling="cls"`), or BERT's pooler `tanh(W h_[CLS] + b)`, a
    `Dense` layer `pooled_dense` on the first token (`pooling="cls_dense"`).
    Inputs may be shorter than
    `max_sequence_length` (batches cut to their longest sequence).

    With `synthesizer="vanilla"` this is a BERT-style encoder built from
    keras-hub's `TransformerEncoder` blocks (dot-product attention).

    Args:
        vocabulary_size: int, the size of the token vocabulary.
        num_layers: int, the number of encoder blocks.
        num_heads: int, the attention heads of each block.
        hidden_dim: int, the width of the model (divisible by `num_heads`).
        intermediate_dim: int, the width of each feedforward network.
        synthesizer: the attention variant: `"vanilla"`, `"dense"`,
            `"random"`, `"fixed_random"`, `"factorized_dense"`,
            `"factorized_random"` or a mixture such as `"random+vanilla"`.
            Defaults to `"dense"`.
        max_sequence_length: int, the longest input (the position
            embedding's and the synthesizers' length). Defaults to 512.
        num_segments: int, the segment ids an input may hold; with 2 or
            more a segment embedding is added (sentence pairs). Defaults
            to 1.
        pooling: `"mean"`, `"cls"` or `"cls_dense"` (BERT's pooler, as
            `keras_synth.models.convert_keras_hub_backbone` makes it).
            Defaults to `"mean"`.
        dropout: float, dropout of embeddings, attention and feedforward.
            Defaults to 0.1.
        activation: the feedforward activation. Defaults to `"relu"`.
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
        dtype: the dtype policy of the layers (e.g. `"mixed_bfloat16"`).
        **kwargs: `keras_hub.models.Backbone` arguments (`name`, ...).

    Call arguments:
        inputs: a dict of int `(batch, length)` tensors `"token_ids"`,
            `"segment_ids"` and `"padding_mask"` (1 for tokens, 0 for
            padding), `length <= max_sequence_length`.

    Returns:
        A dict with `"sequence_output"` and `"pooled_output"`.

    Example:

    >>> import numpy as np
    >>> backbone = SynthesizerBackbone(
    ...     vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=32, synthesizer="random+vanilla",
    ...     max_sequence_length=12)
    >>> inputs = {"token_ids": np.ones((2, 12), "int32"),
    ...           "segment_ids": np.zeros((2, 12), "int32"),
    ...           "padding_mask": np.arange(12)[None] < np.array([[12], [5]])}
    >>> outputs = backbone(inputs)
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((2, 12, 16), (2, 16))
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        synthesizer="dense",
        max_sequence_length=512,
        num_segments=1,
        pooling="mean",
        dropout=0.1,
        activation="relu",
        layer_norm_epsilon=1e-5,
        synthesizer_options=None,
        feedforward_chunk_size=None,
        dtype=None,
        **kwargs,
    ):
        synthesizer_options = synthesizer_options_argument(
            kwargs, [synthesizer], synthesizer_options, type(self).__name__)
        check_backbone_args(
            vocabulary_size=vocabulary_size, num_layers=num_layers,
            num_heads=num_heads, hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments, pooling=pooling)
        # === Layers ===
        self.embeddings = keras_hub.layers.TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=hidden_dim,
            dtype=dtype,
            name="embedding",
        )
        self.segment_embedding = None
        if num_segments > 1:
            self.segment_embedding = keras.layers.Embedding(
                num_segments, hidden_dim, dtype=dtype,
                name="segment_embedding",
            )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embedding_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        self.transformer_layers = [
            self._encoder_block(
                intermediate_dim=intermediate_dim,
                num_heads=num_heads,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                synthesizer=synthesizer,
                max_length=max_sequence_length,
                synthesizer_options=synthesizer_options,
                feedforward_chunk_size=feedforward_chunk_size,
                dtype=dtype,
                name=f"encoder_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooler = keras.layers.GlobalAveragePooling1D(
            dtype=dtype, name="pooling"
        )
        self.pooled_dense = None
        if pooling == "cls_dense":
            self.pooled_dense = keras.layers.Dense(
                hidden_dim, activation="tanh", dtype=dtype,
                name="pooled_dense",
            )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(
            (None,), dtype="int32", name="padding_mask"
        )
        x = self._embed(token_ids, segment_ids)
        for layer in self.transformer_layers:
            x = layer(x, padding_mask=padding_mask)
        if pooling == "mean":
            pooled = self.pooler(x, mask=padding_mask)
        else:
            pooled = x[:, 0, :]
            if self.pooled_dense is not None:
                pooled = self.pooled_dense(pooled)
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs={"sequence_output": x, "pooled_output": pooled},
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
            synthesizer=synthesizer,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            pooling=pooling,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            synthesizer_options=synthesizer_options,
            feedforward_chunk_size=feedforward_chunk_size,
        )

    def _encoder_block(self, **kwargs):
        """One encoder block of the stack: `SynthesizerEncoder(**kwargs)`.

        The one place the blocks are made (in `__init__`, before the
        functional model exists), so that a subclass may return a
        `SynthesizerEncoder` subclass built from the same arguments, e.g.
        with another attention layer (`SynthesizerEncoder._attention`).
        Such a subclass saves with its own class: this package's presets
        and loaders know `SynthesizerBackbone` only.
        """
        return SynthesizerEncoder(**kwargs)

    def _embed(self, token_ids, segment_ids, training=None):
        x = self.embeddings(token_ids)
        if self.segment_embedding is not None:
            x = x + self.segment_embedding(segment_ids)
        x = self.embeddings_layer_norm(x)
        return self.embeddings_dropout(x, training=training)

    def attention_scores(self, inputs):
        """The attention probabilities of every block, in inference mode.

        Args:
            inputs: the backbone's input dict.

        Returns:
            A list (one per block) of `(batch, num_heads, length, length)`
            tensors.
        """
        x = self._embed(inputs["token_ids"], inputs["segment_ids"],
                        training=False)
        scores = []
        for layer in self.transformer_layers:
            x, score = layer(x, padding_mask=inputs["padding_mask"],
                             return_attention_scores=True, training=False)
            scores.append(score)
        return scores

    @classmethod
    def from_preset(cls, preset, **kwargs):
        return load_preset(
            cls, preset,
            lambda: super(SynthesizerBackbone, cls).from_preset(
                preset, **kwargs),
            expected_backbone=cls,
        )

    def get_config(self):
        config = super().get_config()
        config["activation"] = keras.activations.serialize(
            keras.activations.get(self.activation)
        )
        return config


def check_backbone_args(pooling, **sizes):
    """ValueError naming the first bad size or pooling."""
    check_backbone_sizes(**sizes)
    if pooling not in POOLINGS:
        raise ValueError(
            f"Argument `pooling` must be one of {POOLINGS}. Received: "
            f"pooling={pooling!r}"
        )
