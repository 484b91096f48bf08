"""`SynthesizerCausalLM`: next-token prediction and cached `generate()`."""

import keras
from keras import ops

from keras_synth.models.preset_utils import PresetTaskMixin
from keras_synth.models.shuffled_fit import ShuffledFitMixin
from keras_synth.models.traced_preprocessing import TracedPreprocessingMixin
from keras_synth.models.quantization import QuantizeMixin
from keras_synth.models.export_formats import TaskExportMixin
from keras_synth._hub import keras_hub
from keras_synth.models import generation_utils as utils
from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm_backbone import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm_preprocessor import (
    SynthesizerCausalLMPreprocessor,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerCausalLM(
    PresetTaskMixin, QuantizeMixin, ShuffledFitMixin, TracedPreprocessingMixin,
    TaskExportMixin,
    utils.SamplerCompileMixin,
    keras_hub.models.CausalLM,
):
    """A decoder-only Synthesizer language model with `generate()`.

    The logits are the backbone's hidden states times the (tied) token
    embedding. `fit()`, `predict()` and `generate()` take raw strings when a
    `preprocessor` is attached. `generate()` decodes through the blocks'
    caches (`call_with_cache`): values only for pure synthesizers, keys and
    values for variants with a dot-product part. Sampling is set by
    `compile(sampler=...)`: `"greedy"` (default), any keras-hub sampler, or
    `keras_synth.samplers.LengthPenaltyBeamSampler`.

    Args:
        backbone: a `SynthesizerCausalLMBackbone`.
        preprocessor: a `SynthesizerCausalLMPreprocessor` or `None` (token
            ids in and out).

    Example:

    >>> import keras_synth
    >>> texts = ["ROMEO: hi there.", "JULIET: hello."]
    >>> tokenizer = keras_synth.models.SynthesizerCharTokenizer(
    ...     keras_synth.models.SynthesizerCharTokenizer.learn_vocabulary(texts))
    >>> preprocessor = keras_synth.models.SynthesizerCausalLMPreprocessor(
    ...     tokenizer, sequence_length=24)
    >>> backbone = keras_synth.models.SynthesizerCausalLMBackbone(
    ...     vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
    ...     num_heads=2, hidden_dim=16, intermediate_dim=32,
    ...     max_sequence_length=24, synthesizer="random")
    >>> lm = keras_synth.models.SynthesizerCausalLM(backbone, preprocessor)
    >>> history = lm.fit(texts, batch_size=2, epochs=1, verbose=0)
    >>> isinstance(lm.generate("ROMEO:", max_length=12), str)
    True
    """

    backbone_cls = SynthesizerCausalLMBackbone
    preprocessor_cls = SynthesizerCausalLMPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor

        # === Functional model ===
        inputs = backbone.input
        hidden_states = backbone(inputs)
        outputs = backbone.token_embedding(hidden_states, reverse=True)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def call_with_cache(self, token_ids, cache, cache_update_index):
        """Forward pass of the tokens at `cache_update_index` with caches.

        Args:
            token_ids: `(batch, length)` int tensor, the tokens at positions
                `cache_update_index ... + length - 1`.
            cache: a tuple with one self-attention cache per block (see
                `SynthesizerDecoder.initial_cache`).
            cache_update_index: int or int tensor, the position of the first
                token.

        Returns:
            `(logits, hidden_states, cache)`.
        """
        backbone = self.backbone
        x = backbone.embed(token_ids, start_index=cache_update_index)
        x, cache = utils.decode_with_caches(
            backbone.transformer_layers, x, cache, cache_update_index
        )
        if backbone.layer_norm is not None:
            x = backbone.layer_norm(x)
        logits = backbone.token_embedding(x, reverse=True)
        return logits, x, cache

    def _build_cache(self, token_ids):
        """Empty caches, seeded with the whole prompt."""
        batch_size, length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
        cache = utils.initial_self_attention_caches(
            self.backbone.transformer_layers,
            batch_size,
            length,
            self.compute_dtype,
        )
        _, hidden_states, cache = self.call_with_cache(token_ids, cache, 0)
        return hidden_states, cache

    def generate_step(self, inputs, stop_token_ids=None):
        """Generates one batch: `{"token_ids", "padding_mask"}` in and out.

        Compilable (XLA); `generate()` wraps it.
        """
        token_ids, padding_mask = inputs["token_ids"], inputs["padding_mask"]
        utils.check_generate_length(
            token_ids.shape[1], self.backbone.max_sequence_length,
            "token_ids.shape[1]",
        )
        hidden_states, cache = self._build_cache(token_ids)
        index = ops.min(ops.sum(ops.cast(padding_mask, "int32"), axis=-1))

        def next(prompt, cache, index):
            cache_update_index = index - 1
            batch_size = ops.shape(prompt)[0]
            prompt = ops.slice(prompt, [0, cache_update_index], [batch_size, 1])
            logits, hidden_states, cache = self.call_with_cache(
                prompt, cache, cache_update_index
            )
            return (
                ops.squeeze(logits, axis=1),
                ops.squeeze(hidden_states, axis=1),
                cache,
            )

        token_ids = self.sampler(
            next=next,
            prompt=token_ids,
            cache=cache,
            index=index,
            mask=padding_mask,
            stop_token_ids=stop_token_ids,
            hidden_states=hidden_states,
            model=self,
        )
        return {
            "token_ids": token_ids,
            "padding_mask": utils.padding_after_stop(
                token_ids, padding_mask, stop_token_ids
            ),
        }
