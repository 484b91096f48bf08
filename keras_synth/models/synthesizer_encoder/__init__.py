"""The encoder family: backbone, text classifier and its preprocessor."""

from keras_synth.models.synthesizer_encoder.synthesizer_backbone import (
    SynthesizerBackbone,
)
from keras_synth.models.synthesizer_encoder.synthesizer_text_classifier import (
    SynthesizerTextClassifier,
)
from keras_synth.models.synthesizer_encoder.synthesizer_text_classifier import (
    export_text_classifier,
)
from keras_synth.models.synthesizer_encoder.synthesizer_text_classifier_preprocessor import (  # noqa: E501
    SynthesizerTextClassifierPreprocessor,
)

__all__ = [
    "SynthesizerBackbone",
    "SynthesizerTextClassifier",
    "SynthesizerTextClassifierPreprocessor",
    "export_text_classifier",
]
