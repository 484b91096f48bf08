"""Tokenizers shared by the model families: WordPiece, character and byte
level, learning a WordPiece vocabulary, and the sentinel tokens of span
corruption."""

from keras_synth.models.tokenizers.byte_tokenizer import (
    SynthesizerByteTokenizer,
)
from keras_synth.models.tokenizers.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)
from keras_synth.models.tokenizers.sentinel_tokens import SENTINEL_TOKEN_FORMAT
from keras_synth.models.tokenizers.sentinel_tokens import sentinel_tokens
from keras_synth.models.tokenizers.synthesizer_tokenizer import RESERVED_TOKENS
from keras_synth.models.tokenizers.synthesizer_tokenizer import (
    SynthesizerTokenizer,
)
from keras_synth.models.tokenizers.wordpiece_vocabulary import (
    learn_wordpiece_vocabulary,
)

__all__ = [
    "RESERVED_TOKENS",
    "SENTINEL_TOKEN_FORMAT",
    "SynthesizerByteTokenizer",
    "SynthesizerCharTokenizer",
    "SynthesizerTokenizer",
    "learn_wordpiece_vocabulary",
    "sentinel_tokens",
]
