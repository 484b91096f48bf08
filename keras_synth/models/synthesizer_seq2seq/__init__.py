"""The encoder-decoder family: backbone, seq2seq LM, its preprocessor and
span corruption (pretraining)."""

from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_backbone import (  # noqa: E501
    SynthesizerSeq2SeqBackbone,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm import (
    SynthesizerSeq2SeqLM,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm_preprocessor import (  # noqa: E501
    SynthesizerSeq2SeqLMPreprocessor,
)
from keras_synth.models.synthesizer_seq2seq.synthesizer_span_corruption_preprocessor import (  # noqa: E501
    SynthesizerSpanCorruptionPreprocessor,
)
from keras_synth.models.synthesizer_seq2seq.span_corruption import (
    random_spans_noise_mask,
)
from keras_synth.models.synthesizer_seq2seq.span_corruption import (
    span_corruption_counts,
)
from keras_synth.models.synthesizer_seq2seq.span_corruption import (
    span_corruption_lengths,
)
from keras_synth.models.synthesizer_seq2seq.span_corruption import (
    span_corruption_text_length,
)

__all__ = [
    "SynthesizerSeq2SeqBackbone",
    "SynthesizerSeq2SeqLM",
    "SynthesizerSeq2SeqLMPreprocessor",
    "SynthesizerSpanCorruptionPreprocessor",
    "random_spans_noise_mask",
    "span_corruption_counts",
    "span_corruption_lengths",
    "span_corruption_text_length",
]
