"""`SynthesizerTokenizer`: WordPiece with the reserved tokens of the
Synthesizer models."""

import re

import keras
from keras_synth._hub import keras_hub

from keras_synth.models.preset_utils import check_local_preset
from keras_synth.models.preset_utils import load_local_tokenizer

RESERVED_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")

# `join_punctuation`: WordPiece splits punctuation off words ("a man ' s
# t - shirt ."); these (pattern, replacement) rules join it back as English
# and German are written. Valid for Python's `re` and for RE2
# (`tf.strings.regex_replace`, inside graphs and SavedModels).
PUNCTUATION_RULES = (
    (r" ([.,!?;:%)\]}])", r"\1"),  # no space before closing punctuation
    (r"([(\[{$]) ", r"\1"),  # nor after opening brackets
    (r" ?([-/']) ?", r"\1"),  # t - shirt, man ' s, and / or
    (r"^ +| +$", ""),
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerTokenizer(keras_hub.tokenizers.WordPieceTokenizer):
    """WordPiece tokenizer of the Synthesizer models.

    A `keras_hub.tokenizers.WordPieceTokenizer` whose vocabulary must hold
    the reserved tokens `[PAD]`, `[CLS]`, `[SEP]`, `[UNK]` and `[MASK]`:
    `[CLS]`/`[SEP]` start and end packed sequences, `[PAD]` pads them,
    `[UNK]` stands for words outside the vocabulary. A vocabulary lacking
    any of them is refused with an error that names them. Learn a
    vocabulary from text with `keras_synth.models.learn_wordpiece_vocabulary`.

    Like every keras-hub tokenizer, it maps a batch of strings to ragged
    token ids (a dense tensor for a scalar string) and is saved with
    `save_to_preset` (the vocabulary becomes a preset asset).

    Args:
        vocabulary: a list of word pieces, or the path of a file with one
            word piece a line.
        lowercase: bool, whether to lowercase the input. Defaults to `True`.
        join_punctuation: bool, whether `detokenize` writes punctuation as
            text is written: no space before `.,!?;:%)]}`, after `([{$`, nor
            around `-'/` (`"a man's t-shirt."`, not `"a man ' s t - shirt
            ."`), for output scored against raw text (BLEU). Defaults to
            `False` (WordPiece's detokenization, pieces joined by spaces).
        **kwargs: further `WordPieceTokenizer` arguments (`strip_accents`,
            `split`, `dtype`, ...). `oov_token` defaults to `"[UNK]"`.

    Example:

    >>> vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]",
    ...          "the", "plot", "is", "dull", "."]
    >>> tokenizer = SynthesizerTokenizer(vocabulary=vocab)
    >>> [int(i) for i in tokenizer("The plot is dull.")]
    [5, 6, 7, 8, 9]
    >>> [int(i) for i in tokenizer("The plot is grand.")]
    [5, 6, 7, 3, 9]
    >>> SynthesizerTokenizer(vocab, join_punctuation=True).detokenize(
    ...     [5, 6, 7, 8, 9])
    'the plot is dull.'
    """

    # `backbone_cls` (keras-hub's `from_preset` looks the tokenizer of an
    # encoder preset up by it) is set to `SynthesizerBackbone` by the encoder
    # family (`synthesizer_text_classifier_preprocessor`): the model families
    # import the tokenizers, never the reverse.

    def __init__(self, vocabulary=None, lowercase=True,
                 join_punctuation=False, **kwargs):
        self._add_special_token("[PAD]", "pad_token")
        self._add_special_token("[CLS]", "cls_token")
        self._add_special_token("[SEP]", "sep_token")
        self._add_special_token("[MASK]", "mask_token")
        self._add_special_token("[CLS]", "start_token")
        self._add_special_token("[SEP]", "end_token")
        kwargs.setdefault("oov_token", "[UNK]")
        super().__init__(vocabulary=vocabulary, lowercase=lowercase, **kwargs)
        self.join_punctuation = bool(join_punctuation)

    def detokenize(self, inputs):
        text = super().detokenize(inputs)
        if not self.join_punctuation:
            return text
        return _join_punctuation(text)

    def get_config(self):
        config = super().get_config()
        config["join_punctuation"] = self.join_punctuation
        return config

    @classmethod
    def from_preset(cls, preset, config_file="tokenizer.json", **kwargs):
        """The tokenizer of a preset, of any model family that saved a
        `SynthesizerTokenizer` (encoder, encoder-decoder, causal LM)."""
        check_local_preset(preset)
        tokenizer = load_local_tokenizer(preset, config_file, cls, **kwargs)
        if tokenizer is not None:
            return tokenizer
        return super().from_preset(preset, config_file=config_file, **kwargs)

    def set_vocabulary(self, vocabulary):
        if vocabulary is not None:
            check_reserved_tokens(vocabulary, type(self).__name__)
        super().set_vocabulary(vocabulary)


def _join_punctuation(text):
    """`PUNCTUATION_RULES` applied to a string tensor, or to a (nested list
    of) Python strings as detokenization returns them eagerly."""
    import tensorflow as tf

    if isinstance(text, (tf.Tensor, tf.RaggedTensor)):
        for pattern, rewrite in PUNCTUATION_RULES:
            text = tf.strings.regex_replace(text, pattern, rewrite)
        return text
    if isinstance(text, (list, tuple)):
        return [_join_punctuation(t) for t in text]
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    for pattern, rewrite in PUNCTUATION_RULES:
        text = re.sub(pattern, rewrite, text)
    return text


def check_reserved_tokens(vocabulary, owner="SynthesizerTokenizer"):
    """Raises ValueError naming the reserved tokens `vocabulary` lacks.

    Args:
        vocabulary: a list of tokens or the path of a vocabulary file.
        owner: the class named in the message.
    """
    if isinstance(vocabulary, str):
        with open(vocabulary, encoding="utf-8") as f:
            tokens = [line.rstrip("\n") for line in f]
        where = f"vocabulary file {vocabulary!r}"
    else:
        tokens = list(vocabulary)
        where = f"vocabulary of {len(tokens)} tokens"
    missing = [t for t in RESERVED_TOKENS if t not in tokens]
    if missing:
        raise ValueError(
            f"Argument `vocabulary` of {owner}: the {where} lacks the "
            f"reserved token(s) {missing}. Expected all of "
            f"{list(RESERVED_TOKENS)} (learn_wordpiece_vocabulary puts "
            "them first)."
        )
