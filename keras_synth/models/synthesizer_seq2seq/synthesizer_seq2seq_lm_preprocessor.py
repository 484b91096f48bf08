"""`SynthesizerSeq2SeqLMPreprocessor`: source/target strings to token ids."""

import keras

from keras_synth._hub import keras_hub
from keras_synth.models.tokenizers.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_backbone import (
    SynthesizerSeq2SeqBackbone,
)
from keras_synth.models.truncation import CheckedPacker
from keras_synth.models.truncation import check_packer
from keras_synth.models.truncation import check_truncation_mode

ENCODER_TOKENIZER_CONFIG_FILE = "encoder_tokenizer.json"


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerSeq2SeqLMPreprocessor(keras_hub.models.Seq2SeqLMPreprocessor):
    """Tokenizes and packs source and target text for `SynthesizerSeq2SeqLM`.

    keras-hub's `Seq2SeqLMPreprocessor` with one tokenizer for both sides
    (a shared vocabulary), or a source tokenizer of its own
    (`encoder_tokenizer`, with `SynthesizerSeq2SeqBackbone(
    encoder_vocabulary_size=...)`): `{"encoder_text", "decoder_text"}` become
    `[CLS]` + tokens + `[SEP]` packed to `encoder_sequence_length` and
    `decoder_sequence_length`; the decoder features are the target without
    its last token, the labels without its first. `generate_preprocess`
    takes source strings alone (or a dict with a `decoder_text` prompt).
    The tokenizer is the WordPiece `SynthesizerTokenizer` or a
    `SynthesizerCharTokenizer`.

    Args:
        tokenizer: the tokenizer (start, end and pad tokens needed); of the
            target side only when `encoder_tokenizer` is given.
        encoder_sequence_length: int. Defaults to 1024.
        decoder_sequence_length: int. Defaults to 1024.
        encoder_tokenizer: the source tokenizer, or `None` (default:
            `tokenizer` serves both sides). Presets keep it apart from the
            target tokenizer: its `config_file` is set to
            `"encoder_tokenizer.json"` when it has the target's.
        truncation: `"warn"` (default), `"error"` or `"allow"`: what
            happens to sources longer than `encoder_sequence_length` and
            training targets longer than `decoder_sequence_length`, special
            tokens included (a `keras_synth.models.TruncationWarning`, a
            `ValueError`, or silent cutting; see
            `keras_synth.models.truncation` for `tf.data` and exports). A
            `generate()` target prompt is never cut: one that fills the
            decoder's context raises a `ValueError`.

    Call arguments:
        x: dict of `encoder_text` and `decoder_text` strings.
        y, sample_weight: must be `None`.

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `encoder_token_ids`,
        `encoder_padding_mask`, `decoder_token_ids`, `decoder_padding_mask`.

    Example:

    >>> tokenizer = SynthesizerCharTokenizer(
    ...     SynthesizerCharTokenizer.learn_vocabulary(["ab", "ba"]))
    >>> preprocessor = SynthesizerSeq2SeqLMPreprocessor(
    ...     tokenizer, encoder_sequence_length=4, decoder_sequence_length=4)
    >>> x, y, w = preprocessor({"encoder_text": ["ab"], "decoder_text": ["ba"]})
    >>> to_list = lambda t: keras.ops.convert_to_numpy(t).tolist()
    >>> to_list(x["encoder_token_ids"]), to_list(y)
    ([[1, 4, 5, 2]], [[5, 4, 2, 0]])
    """

    draws_random = False  # deterministic: traced once (`TracedPreprocessingMixin`)

    backbone_cls = SynthesizerSeq2SeqBackbone
    tokenizer_cls = SynthesizerCharTokenizer

    def __init__(
        self,
        tokenizer,
        encoder_sequence_length=1024,
        decoder_sequence_length=1024,
        encoder_tokenizer=None,
        truncation="warn",
        **kwargs,
    ):
        self.truncation = check_truncation_mode(truncation)
        super().__init__(
            tokenizer,
            encoder_sequence_length=encoder_sequence_length,
            decoder_sequence_length=decoder_sequence_length,
            **kwargs,
        )
        if encoder_tokenizer is not None:
            if encoder_tokenizer is tokenizer:
                encoder_tokenizer = None
            elif encoder_tokenizer.config_file == getattr(
                tokenizer, "config_file", None
            ):
                encoder_tokenizer.config_file = ENCODER_TOKENIZER_CONFIG_FILE
        self.encoder_tokenizer = encoder_tokenizer

    def build(self, input_shape):
        super().build(input_shape)
        source = self.encoder_tokenizer
        if source is not None:
            self.encoder_packer = keras_hub.layers.StartEndPacker(
                start_value=source.start_token_id,
                end_value=source.end_token_id,
                pad_value=source.pad_token_id,
                sequence_length=self.encoder_sequence_length,
                return_padding_mask=True,
            )
        check_packer(
            self, "encoder_packer", truncation=self.truncation,
            what="sources", argument="encoder_sequence_length",
        )
        check_packer(
            self, "decoder_packer", truncation=self.truncation,
            what="targets", argument="decoder_sequence_length", offset=1,
        )

    def _base_source_unchecked(self):
        """Stops the check of the base class's source packing.

        With a source tokenizer of its own, the base class packs the source
        tokenized by the target tokenizer, features that `_with_source`
        replaces: only the second packing is measured.
        """
        if self.encoder_tokenizer is not None:
            self.encoder_packer.truncation = "allow"

    def _with_source(self, inputs, encoder_text, encoder_sequence_length):
        """`inputs` with the encoder features of `encoder_tokenizer`.

        keras-hub's base class tokenizes the source with `tokenizer`; with a
        source tokenizer of its own, those features are replaced here.
        """
        if self.encoder_tokenizer is None:
            return inputs
        self.encoder_packer.truncation = self.truncation
        token_ids, padding_mask = self.encoder_packer(
            self.encoder_tokenizer(encoder_text),
            sequence_length=(
                encoder_sequence_length or self.encoder_sequence_length
            ),
        )
        return dict(
            inputs,
            encoder_token_ids=token_ids,
            encoder_padding_mask=padding_mask,
        )

    def call(self, x, y=None, sample_weight=None, **kwargs):
        if not self.built:
            self.build(None)
        self._base_source_unchecked()
        try:
            outputs = super().call(x, y, sample_weight, **kwargs)
        finally:
            self.encoder_packer.truncation = self.truncation
        if self.encoder_tokenizer is None:
            return outputs
        x_out, y, sample_weight = keras.utils.unpack_x_y_sample_weight(outputs)
        x_out = self._with_source(
            x_out, x["encoder_text"], kwargs.get("encoder_sequence_length")
        )
        return keras.utils.pack_x_y_sample_weight(x_out, y, sample_weight)

    def generate_preprocess(self, x, **kwargs):
        if not self.built:
            self.build(None)
        self._base_source_unchecked()
        decoder_packer = self.decoder_packer
        self.decoder_packer = CheckedPacker(
            decoder_packer.packer, "error", what="target prompt",
            room=True, argument=(
                "`max_length` of `generate()`, default the preprocessor's "
                "`decoder_sequence_length`"
            ),
        )
        try:
            outputs = super().generate_preprocess(x, **kwargs)
        finally:
            self.decoder_packer = decoder_packer
            self.encoder_packer.truncation = self.truncation
        encoder_text = x["encoder_text"] if isinstance(x, dict) else x
        return self._with_source(
            outputs, encoder_text, kwargs.get("encoder_sequence_length")
        )

    def get_config(self):
        # keras-hub's base class leaves the lengths out of its config.
        config = super().get_config()
        config.update(
            {
                "truncation": self.truncation,
                "encoder_sequence_length": self.encoder_sequence_length,
                "decoder_sequence_length": self.decoder_sequence_length,
                "encoder_tokenizer": (
                    None
                    if self.encoder_tokenizer is None
                    else keras.layers.serialize(self.encoder_tokenizer)
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        source = config.get("encoder_tokenizer")
        if isinstance(source, dict):
            config = dict(
                config, encoder_tokenizer=keras.layers.deserialize(source)
            )
        return super().from_config(config)
