"""`SynthesizerTextClassifierPreprocessor`: raw strings to packed ids."""

import keras
from keras_synth._hub import keras_hub

from keras_synth.models.synthesizer_encoder.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.preset_utils import PresetPreprocessorMixin
from keras_synth.models.tokenizers.synthesizer_tokenizer import SynthesizerTokenizer
from keras_synth.models.truncation import check_packer
from keras_synth.models.truncation import check_truncation_mode

# keras-hub finds the tokenizer of an encoder preset
# (`keras_hub.tokenizers.Tokenizer.from_preset`) by its `backbone_cls`. Set
# here, where the encoder family meets the tokenizers it uses: the tokenizers
# do not import the model families.
SynthesizerTokenizer.backbone_cls = SynthesizerBackbone


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerTextClassifierPreprocessor(
    PresetPreprocessorMixin, keras_hub.models.TextClassifierPreprocessor
):
    """Preprocessing of `SynthesizerTextClassifier`: strings to packed ids.

    Tokenizes one segment (a sentence) or two (a pair) with a
    `SynthesizerTokenizer` and packs them as `[CLS] a [SEP]` or
    `[CLS] a [SEP] b [SEP]` (`keras_hub.layers.MultiSegmentPacker`,
    truncated to `sequence_length`), giving a dict of `"token_ids"`,
    `"segment_ids"` (0 for the first segment, 1 for the second) and
    `"padding_mask"`. Labels and sample weights pass through unchanged, so
    the layer maps a `tf.data.Dataset` of `(x, y)` for `fit`; integer labels
    for classification, float scores for regression (STS-B). It runs in
    `tf.data` and, like every keras-hub preprocessor, on any Keras backend.

    `from_preset` of a preset saved by another task (a
    `SynthesizerMaskedLM`'s, say) builds one from the preset's tokenizer
    with the `sequence_length` of the preset's preprocessor (unless given);
    so does `SynthesizerTextClassifier.from_preset`.

    Args:
        tokenizer: a `keras_synth.models.SynthesizerTokenizer`.
        sequence_length: int, the packed length. Defaults to 128.
        truncate: `"round_robin"` or `"waterfall"`, how pairs are cut to
            `sequence_length`. Defaults to `"round_robin"`.
        truncation: what happens to inputs longer than `sequence_length`
            (special tokens included): `"warn"` (default) cuts them with a
            `keras_synth.models.TruncationWarning` saying how many were cut
            and their lengths, `"error"` raises, `"allow"` cuts them
            silently. In a `tf.data` pipeline the check runs as a
            `tf.py_function`; in an exported SavedModel `"warn"` does
            nothing (see `keras_synth.models.truncation`).
        **kwargs: base layer arguments.

    Call arguments:
        x: a string tensor or list `(batch,)`, or a tuple of two of them
            for sentence pairs (pass a pair as `x=(first, second)`: like
            every keras-hub preprocessor, the layer reads a positional
            2-tuple as `(x, y)`).
        y: optional labels.
        sample_weight: optional sample weights.

    Returns:
        `x`, `(x, y)` or `(x, y, sample_weight)`, `x` the dict above.

    Example:

    >>> vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]",
    ...          "the", "plot", "is", "dull", "."]
    >>> preprocessor = SynthesizerTextClassifierPreprocessor(
    ...     SynthesizerTokenizer(vocab), sequence_length=8)
    >>> x = preprocessor(x=(["the plot is dull ."], ["the plot ."]))
    >>> [int(i) for i in x["token_ids"][0]]
    [1, 5, 6, 7, 2, 5, 6, 2]
    >>> [int(i) for i in x["segment_ids"][0]]
    [0, 0, 0, 0, 0, 1, 1, 1]
    """

    draws_random = False  # deterministic: traced once (`TracedPreprocessingMixin`)

    backbone_cls = SynthesizerBackbone
    tokenizer_cls = SynthesizerTokenizer

    def __init__(self, tokenizer, sequence_length=128,
                 truncate="round_robin", truncation="warn", **kwargs):
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(
                "Argument `sequence_length` must be an int of at least 3 "
                "(`[CLS]`, a token, `[SEP]`). Received: "
                f"sequence_length={sequence_length!r}"
            )
        self.truncation = check_truncation_mode(truncation)
        super().__init__(tokenizer=tokenizer, sequence_length=sequence_length,
                         truncate=truncate, **kwargs)

    def build(self, input_shape):
        super().build(input_shape)
        check_packer(self, "packer", truncation=self.truncation)

    def get_config(self):
        config = super().get_config()
        config["truncation"] = self.truncation
        return config

