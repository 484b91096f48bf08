"""`SynthesizerTokenizer`: WordPiece with the reserved tokens of the
Synthesizer models."""

import keras
import keras_hub

from keras_synth.models.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.synthesizer_backbone import check_local_preset

RESERVED_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")


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
    """

    backbone_cls = SynthesizerBackbone

    def __init__(self, vocabulary=None, lowercase=True, **kwargs):
        self._add_special_token("[PAD]", "pad_token")
        self._add_special_token("[CLS]", "cls_token")
        self._add_special_token("[SEP]", "sep_token")
        self._add_special_token("[MASK]", "mask_token")
        self._add_special_token("[CLS]", "start_token")
        self._add_special_token("[SEP]", "end_token")
        kwargs.setdefault("oov_token", "[UNK]")
        super().__init__(vocabulary=vocabulary, lowercase=lowercase, **kwargs)

    @classmethod
    def from_preset(cls, preset, **kwargs):
        check_local_preset(preset)
        return super().from_preset(preset, **kwargs)

    def set_vocabulary(self, vocabulary):
        if vocabulary is not None:
            check_reserved_tokens(vocabulary, type(self).__name__)
        super().set_vocabulary(vocabulary)


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
