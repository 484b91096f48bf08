"""The decoder-only family: backbone, causal LM and its preprocessor."""

from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm import (
    SynthesizerCausalLM,
)
from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm_backbone import (  # noqa: E501
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm_preprocessor import (  # noqa: E501
    SynthesizerCausalLMPreprocessor,
)

__all__ = [
    "SynthesizerCausalLM",
    "SynthesizerCausalLMBackbone",
    "SynthesizerCausalLMPreprocessor",
]
