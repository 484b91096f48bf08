"""`SynthesizerSeq2SeqLM`: conditional generation with an encoder-decoder."""

import keras
from keras import ops

from keras_synth.models.preset_utils import PresetTaskMixin
from keras_synth.models.shuffled_fit import ShuffledFitMixin
from keras_synth.models.traced_preprocessing import TracedPreprocessingMixin
from keras_synth.models.quantization import QuantizeMixin
from keras_synth.models.export_formats import TaskExportMixin
from keras_synth._hub import keras_hub
from keras_synth.models import generation_utils as utils
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_backbone import (
    SynthesizerSeq2SeqBackbone,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm_preprocessor import (
    SynthesizerSeq2SeqLMPreprocessor,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerSeq2SeqLM(
    PresetTaskMixin, QuantizeMixin, ShuffledFitMixin, TracedPreprocessingMixin,
    TaskExportMixin,
    utils.SamplerCompileMixin,
    keras_hub.models.Seq2SeqLM,
):
    """A Synthesizer encoder-decoder language model with `generate()`.

    The logits are the decoder's hidden states times the (tied) token
    embedding. With a `preprocessor`, `fit()` takes
    `{"encoder_text": ..., "decoder_text": ...}` strings and `generate()`
    source strings (`generate(["Ein Hund läuft."])` returns the generated
    target strings). `generate()` encodes once and decodes through the
    decoder blocks' caches (`call_decoder_with_cache`): self-attention
    caches hold values only for pure synthesizers, keys and values for
    variants with a dot-product part; the cross-attention caches are filled
    on the first step. Sampling is set by `compile(sampler=...)`:
    `"greedy"` (default), any keras-hub sampler, or
    `keras_synth.samplers.LengthPenaltyBeamSampler` (beam search with
    GNMT's length penalty, what translation uses).

    Args:
        backbone: a `SynthesizerSeq2SeqBackbone`.
        preprocessor: a `SynthesizerSeq2SeqLMPreprocessor` or `None`.

    Example:

    >>> import keras_synth
    >>> pairs = {"encoder_text": ["ein hund", "eine katze"],
    ...          "decoder_text": ["a dog", "a cat"]}
    >>> tokenizer = keras_synth.models.SynthesizerCharTokenizer(
    ...     keras_synth.models.SynthesizerCharTokenizer.learn_vocabulary(
    ...         pairs["encoder_text"] + pairs["decoder_text"]))
    >>> preprocessor = keras_synth.models.SynthesizerSeq2SeqLMPreprocessor(
    ...     tokenizer, encoder_sequence_length=12, decoder_sequence_length=12)
    >>> backbone = keras_synth.models.SynthesizerSeq2SeqBackbone(
    ...     vocabulary_size=tokenizer.vocabulary_size(), num_layers=1,
    ...     num_heads=2, hidden_dim=16, intermediate_dim=32,
    ...     max_sequence_length=12, synthesizer="random")
    >>> lm = keras_synth.models.SynthesizerSeq2SeqLM(backbone, preprocessor)
    >>> history = lm.fit(pairs, batch_size=2, epochs=1, verbose=0)
    >>> len(lm.generate(["ein hund", "eine katze"]))
    2
    """

    backbone_cls = SynthesizerSeq2SeqBackbone
    preprocessor_cls = SynthesizerSeq2SeqLMPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor

        # === Functional model ===
        inputs = backbone.input
        hidden_states = backbone(inputs)["decoder_sequence_output"]
        outputs = backbone.token_embedding(hidden_states, reverse=True)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def call_encoder(self, token_ids, padding_mask):
        """The encoder output `(batch, S, hidden_dim)`."""
        return self.backbone.encode(token_ids, padding_mask)

    def call_decoder_with_cache(
        self,
        encoder_hidden_states,
        encoder_padding_mask,
        decoder_token_ids,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
    ):
        """Decodes the tokens at `self_attention_cache_update_index ...`.

        Args:
            encoder_hidden_states: `(batch, S, hidden_dim)` encoder output.
            encoder_padding_mask: `(batch, S)` mask of the source.
            decoder_token_ids: `(batch, length)` decoder tokens.
            self_attention_cache: a tuple with one self-attention cache per
                decoder block.
            self_attention_cache_update_index: int or int tensor, the
                position of the first token.
            cross_attention_cache: a tuple with one cross-attention cache
                per decoder block.
            cross_attention_cache_update_index: `0` to fill the
                cross-attention caches, `None` to reuse them.

        Returns:
            `(logits, hidden_states, self_attention_cache,
            cross_attention_cache)`.
        """
        hidden_states, self_attention_cache, cross_attention_cache = (
            self.backbone.decode(
                decoder_token_ids,
                encoder_hidden_states,
                encoder_padding_mask,
                self_attention_caches=self_attention_cache,
                cross_attention_caches=cross_attention_cache,
                cache_update_index=self_attention_cache_update_index,
                fill_cross_attention_caches=(
                    cross_attention_cache_update_index is not None
                ),
            )
        )
        logits = self.backbone.token_embedding(hidden_states, reverse=True)
        return logits, hidden_states, self_attention_cache, cross_attention_cache

    def _initialize_cache(self, encoder_token_ids, decoder_token_ids):
        """Empty self- and cross-attention caches of every decoder block."""
        batch_size = ops.shape(encoder_token_ids)[0]
        blocks = self.backbone.decoder_transformer_layers
        self_caches = utils.initial_self_attention_caches(
            blocks, batch_size, ops.shape(decoder_token_ids)[1],
            self.compute_dtype,
        )
        cross_caches = utils.initial_cross_attention_caches(
            blocks, batch_size, ops.shape(encoder_token_ids)[1],
            self.compute_dtype,
        )
        return self_caches, cross_caches

    def _build_cache(
        self, encoder_token_ids, encoder_padding_mask, decoder_token_ids
    ):
        """Encodes, then seeds the caches with the whole decoder prompt."""
        encoder_hidden_states = self.call_encoder(
            encoder_token_ids, encoder_padding_mask
        )
        self_cache, cross_cache = self._initialize_cache(
            encoder_token_ids, decoder_token_ids
        )
        _, hidden_states, self_cache, cross_cache = self.call_decoder_with_cache(
            encoder_hidden_states,
            encoder_padding_mask,
            decoder_token_ids,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=0,
            cross_attention_cache=cross_cache,
            cross_attention_cache_update_index=0,
        )
        return hidden_states, encoder_hidden_states, self_cache, cross_cache

    def generate_step(self, inputs, stop_token_ids=None):
        """Generates one batch of decoder token ids (compilable, XLA).

        Args:
            inputs: dict of `encoder_token_ids`, `encoder_padding_mask`,
                `decoder_token_ids`, `decoder_padding_mask`.
            stop_token_ids: ids that end a sequence, or `None`.

        Returns:
            dict of `decoder_token_ids` and `decoder_padding_mask`.
        """
        encoder_token_ids = inputs["encoder_token_ids"]
        encoder_padding_mask = inputs["encoder_padding_mask"]
        decoder_token_ids = inputs["decoder_token_ids"]
        decoder_padding_mask = inputs["decoder_padding_mask"]
        limit = self.backbone.max_sequence_length
        utils.check_generate_length(
            encoder_token_ids.shape[1], limit, "encoder_token_ids.shape[1]"
        )
        utils.check_generate_length(
            decoder_token_ids.shape[1], limit, "decoder_token_ids.shape[1]"
        )
        hidden_states, encoder_hidden_states, self_cache, cross_cache = (
            self._build_cache(
                encoder_token_ids, encoder_padding_mask, decoder_token_ids
            )
        )
        index = ops.min(ops.sum(ops.cast(decoder_padding_mask, "int32"), -1))

        def next(prompt, cache, index):
            cache_index = index - 1
            batch_size = ops.shape(prompt)[0]
            prompt = ops.slice(prompt, [0, cache_index], [batch_size, 1])
            self_cache, encoder_states, encoder_mask, cross_cache = cache
            logits, hidden_states, self_cache, _ = self.call_decoder_with_cache(
                encoder_states,
                encoder_mask,
                prompt,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=cache_index,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=None,
            )
            return (
                ops.squeeze(logits, axis=1),
                ops.squeeze(hidden_states, axis=1),
                (self_cache, encoder_states, encoder_mask, cross_cache),
            )

        decoder_token_ids = self.sampler(
            next=next,
            prompt=decoder_token_ids,
            cache=(
                self_cache,
                encoder_hidden_states,
                encoder_padding_mask,
                cross_cache,
            ),
            index=index,
            mask=decoder_padding_mask,
            stop_token_ids=stop_token_ids,
            hidden_states=hidden_states,
            model=self,
        )
        return {
            "decoder_token_ids": decoder_token_ids,
            "decoder_padding_mask": utils.padding_after_stop(
                decoder_token_ids, decoder_padding_mask, stop_token_ids
            ),
        }
