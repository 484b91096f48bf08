"""The encoder-decoder family: backbone, seq2seq LM and its preprocessor."""

from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_backbone import (  # noqa: E501
    SynthesizerSeq2SeqBackbone,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm import (
    SynthesizerSeq2SeqLM,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm_preprocessor import (  # noqa: E501
    SynthesizerSeq2SeqLMPreprocessor,
)

__all__ = [
    "SynthesizerSeq2SeqBackbone",
    "SynthesizerSeq2SeqLM",
    "SynthesizerSeq2SeqLMPreprocessor",
]
