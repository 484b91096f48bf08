"""The encoder family: backbone, text classifier, masked LM and their
preprocessors."""

from keras_synth.models.synthesizer_encoder.synthesizer_backbone import (
    SynthesizerBackbone,
)
from keras_synth.models.synthesizer_encoder.synthesizer_masked_lm import (
    SynthesizerMaskedLM,
)
from keras_synth.models.synthesizer_encoder.synthesizer_masked_lm_preprocessor import (  # noqa: E501
    SynthesizerMaskedLMPreprocessor,
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
    "SynthesizerMaskedLM",
    "SynthesizerMaskedLMPreprocessor",
    "SynthesizerTextClassifier",
    "SynthesizerTextClassifierPreprocessor",
    "export_text_classifier",
]
