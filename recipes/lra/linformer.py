"""The Linformer-style baseline of `python -m recipes.lra
--attention=linformer`: the recipe's model with Linformer self-attention
(Wang et al. 2020, arXiv 2006.04768) in place of the Synthesizer.

Only the attention layer differs: `LinformerBackbone` is a
`keras_synth.models.SynthesizerBackbone` (same embeddings, pooling and
config) whose blocks (`SynthesizerBackbone._encoder_block`) are
`LinformerEncoder`s, `keras_synth.layers.SynthesizerEncoder`s (same layer
norms, feedforward, dropout, residuals) whose attention
(`SynthesizerEncoder._attention`) is `LinformerAttention`: the benchmark's
NumPy-tested reference `recipes.benchmark.references.Linformer` (keys and
values projected along the length to `projected_length` rows, `E` and `F`
shared by the heads), taking the block's call arguments and dropping its
attention probabilities as `SynthesizerAttention` does.

These classes live in the recipes, not in keras_synth: a saved model of
them needs `recipes` to load, so the recipe writes no preset or SavedModel
for the baseline (`export_skipped` in results.json); its checkpoints are
weights, resumed into the same classes.
"""

import keras

from keras_synth.layers import SynthesizerEncoder
from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.models import SynthesizerBackbone
from recipes.benchmark import references

DEFAULT_PROJECTED_LENGTH = 256


class LinformerAttention(references.Linformer):
    """`references.Linformer` called as the blocks call their attention.

    Args:
        num_heads: int, the attention heads.
        key_dim: int, the features of each head.
        max_length: int, `n`, the longest sequence (columns of `E`, `F`).
        projected_length: int, `k`, the rows keys and values are projected
            to. Defaults to 256.
        dropout: float, dropout of the attention probabilities in
            training. Defaults to 0.
        **kwargs: `references.Linformer`'s (`kernel_initializer`, `name`,
            `dtype`, ...).

    Call arguments:
        query, value: `(batch, length, dim)` tensors (self-attention: the
            same tensor).
        attention_mask: must be None (Linformer has no `(B, T, S)` mask:
            each projected key mixes all positions).
        value_mask: optional boolean `(batch, length)`, True for real
            tokens (padded keys and values are zeroed before the
            projection).
        use_causal_mask: must be False.
        training: whether dropout is active.
        return_attention_scores: also return the probabilities `(batch,
            num_heads, length, projected_length)`.
    """

    def __init__(self, num_heads, key_dim, max_length,
                 projected_length=DEFAULT_PROJECTED_LENGTH, dropout=0.0,
                 **kwargs):
        super().__init__(num_heads, key_dim, max_length,
                         projected_length=projected_length, **kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                "Argument `dropout` of LinformerAttention must be in [0, 1). "
                f"Received: dropout={dropout}")
        self.dropout = dropout
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def call(self, query, value, attention_mask=None, value_mask=None,
             use_causal_mask=False, training=None,
             return_attention_scores=False):
        if attention_mask is not None:
            raise ValueError(
                "LinformerAttention takes no `attention_mask` (each "
                "projected key mixes all positions); pass `value_mask` "
                "(padding). Received: an attention_mask of shape "
                f"{tuple(attention_mask.shape)}")
        outputs, probabilities = self._attend(
            query, value, value_mask, use_causal_mask, training)
        if return_attention_scores:
            return outputs, probabilities
        return outputs

    def _drop(self, probabilities, training):
        return self.dropout_layer(probabilities, training=training)

    def get_config(self):
        config = super().get_config()
        config["dropout"] = self.dropout
        return config


class LinformerEncoder(SynthesizerEncoder):
    """A `SynthesizerEncoder` whose self-attention is `LinformerAttention`
    (`num_heads`, `key_dim = width // num_heads`, `max_length`,
    `projected_length`, the block's `dropout` and kernel initializer); the
    rest of the block is `SynthesizerEncoder`'s, unchanged.

    Args:
        projected_length: int, Linformer's `k`. Defaults to 256.
        **kwargs: `SynthesizerEncoder`'s (`max_length` required; the
            `synthesizer` arguments are not used by the attention).
    """

    def __init__(self, *args, projected_length=DEFAULT_PROJECTED_LENGTH,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if self.max_length is None:
            raise ValueError("LinformerEncoder needs `max_length` (the "
                             "columns of Linformer's E and F). Received: "
                             "max_length=None")
        self.projected_length = projected_length

    def _attention(self, name, synthesizer, key_dim, **kwargs):
        return LinformerAttention(
            num_heads=self.num_heads, key_dim=key_dim,
            max_length=self.max_length,
            projected_length=self.projected_length, dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy, name=name, **kwargs)

    def get_config(self):
        config = super().get_config()
        config["projected_length"] = self.projected_length
        return config


class LinformerBackbone(SynthesizerBackbone):
    """A `SynthesizerBackbone` of `LinformerEncoder` blocks.

    Args:
        projected_length: int, Linformer's `k` (at most
            `max_sequence_length`). Defaults to 256.
        **kwargs: `SynthesizerBackbone`'s (`synthesizer` is not used by
            the attention; pass `"vanilla"`).
    """

    def __init__(self, *args, projected_length=DEFAULT_PROJECTED_LENGTH,
                 **kwargs):
        max_length = kwargs.get("max_sequence_length", 512)
        if projected_length > max_length:
            raise ValueError(
                "Argument `projected_length` must be at most "
                f"`max_sequence_length`={max_length}. Received: "
                f"projected_length={projected_length}")
        self._projected_length = projected_length
        super().__init__(*args, **kwargs)

    @property
    def projected_length(self):
        return self._projected_length

    def _encoder_block(self, **kwargs):
        return LinformerEncoder(projected_length=self._projected_length,
                                **kwargs)

    def get_config(self):
        config = super().get_config()
        config["projected_length"] = self._projected_length
        return config


__all__ = ["DEFAULT_PROJECTED_LENGTH", "LinformerAttention",
           "LinformerBackbone", "LinformerEncoder"]
