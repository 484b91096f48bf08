"""`SynthesizerSeq2SeqLMPreprocessor`: source/target strings to token ids."""

import keras

from keras_synth.layers.block_utils import keras_nlp
from keras_synth.models.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)
from keras_synth.models.synthesizer_seq2seq_backbone import (
    SynthesizerSeq2SeqBackbone,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerSeq2SeqLMPreprocessor(keras_nlp.models.Seq2SeqLMPreprocessor):
    """Tokenizes and packs source and target text for `SynthesizerSeq2SeqLM`.

    keras-hub's `Seq2SeqLMPreprocessor` with one tokenizer for both sides
    (a shared vocabulary): `{"encoder_text", "decoder_text"}` become
    `[CLS]` + tokens + `[SEP]` packed to `encoder_sequence_length` and
    `decoder_sequence_length`; the decoder features are the target without
    its last token, the labels without its first. `generate_preprocess`
    takes source strings alone (or a dict with a `decoder_text` prompt).
    The tokenizer is the WordPiece `SynthesizerTokenizer` or a
    `SynthesizerCharTokenizer`.

    Args:
        tokenizer: the tokenizer (start, end and pad tokens needed).
        encoder_sequence_length: int. Defaults to 1024.
        decoder_sequence_length: int. Defaults to 1024.

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

    backbone_cls = SynthesizerSeq2SeqBackbone
    tokenizer_cls = SynthesizerCharTokenizer

    def get_config(self):
        # keras-hub's base class leaves the lengths out of its config.
        config = super().get_config()
        config.update(
            {
                "encoder_sequence_length": self.encoder_sequence_length,
                "decoder_sequence_length": self.decoder_sequence_length,
            }
        )
        return config
