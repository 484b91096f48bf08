"""Synthesizer backbones, tasks, preprocessors and tokenizers in keras-hub's
model API (`pip install "keras-synth[nlp]"`)."""

from keras_synth.models.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.synthesizer_text_classifier import (
    SynthesizerTextClassifier,
)
from keras_synth.models.synthesizer_text_classifier import (
    export_text_classifier,
)
from keras_synth.models.synthesizer_text_classifier_preprocessor import (
    SynthesizerTextClassifierPreprocessor,
)
from keras_synth.models.synthesizer_tokenizer import RESERVED_TOKENS
from keras_synth.models.synthesizer_tokenizer import SynthesizerTokenizer
from keras_synth.models.synthesizer_tokenizer import (
    learn_wordpiece_vocabulary,
)

__all__ = [
    "RESERVED_TOKENS",
    "SynthesizerBackbone",
    "SynthesizerTextClassifier",
    "SynthesizerTextClassifierPreprocessor",
    "SynthesizerTokenizer",
    "export_text_classifier",
    "learn_wordpiece_vocabulary",
]
