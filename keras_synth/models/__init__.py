"""Synthesizer backbones, tasks, preprocessors and tokenizers in keras-hub's
model API (`pip install "keras-synth[nlp]"`)."""

from keras_synth import _lazy

# Registers release 0.1.0's names of the byte tokenizer and the schedule.
from keras_synth.models import legacy_names  # noqa: F401
from keras_synth.models.conversion import convert_keras_hub_backbone
from keras_synth.models.export_loading import load_export
from keras_synth.models.export_formats import CachedDecodingStep
from keras_synth.models.export_formats import ExportError
from keras_synth.models.export_formats import export_model
from keras_synth.models.export_formats import input_specs
from keras_synth.models.generation_export import export_generator
from keras_synth.models.losses import SmoothedSparseCategoricalCrossentropy
from keras_synth.models.schedules import InverseSqrtSchedule
from keras_synth.models.synthesizer_causal_lm import SynthesizerCausalLM
from keras_synth.models.synthesizer_causal_lm import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_causal_lm import (
    SynthesizerCausalLMPreprocessor,
)
from keras_synth.models.synthesizer_encoder import SynthesizerBackbone
from keras_synth.models.synthesizer_encoder import SynthesizerMaskedLM
from keras_synth.models.synthesizer_encoder import (
    SynthesizerMaskedLMPreprocessor,
)
from keras_synth.models.synthesizer_encoder import SynthesizerTextClassifier
from keras_synth.models.synthesizer_encoder import (
    SynthesizerTextClassifierPreprocessor,
)
from keras_synth.models.synthesizer_encoder import export_text_classifier
from keras_synth.models.synthesizer_seq2seq import SynthesizerSeq2SeqBackbone
from keras_synth.models.synthesizer_seq2seq import SynthesizerSeq2SeqLM
from keras_synth.models.synthesizer_seq2seq import (
    SynthesizerSeq2SeqLMPreprocessor,
)
from keras_synth.models.synthesizer_seq2seq import (
    SynthesizerSpanCorruptionPreprocessor,
)
from keras_synth.models.synthesizer_seq2seq import random_spans_noise_mask
from keras_synth.models.synthesizer_seq2seq import span_corruption_counts
from keras_synth.models.synthesizer_seq2seq import span_corruption_lengths
from keras_synth.models.synthesizer_seq2seq import span_corruption_text_length
from keras_synth.models.tokenizers import RESERVED_TOKENS
from keras_synth.models.tokenizers import SENTINEL_TOKEN_FORMAT
from keras_synth.models.tokenizers import SynthesizerByteTokenizer
from keras_synth.models.tokenizers import SynthesizerCharTokenizer
from keras_synth.models.tokenizers import SynthesizerTokenizer
from keras_synth.models.tokenizers import learn_wordpiece_vocabulary
from keras_synth.models.tokenizers import sentinel_tokens
from keras_synth.models.truncation import TruncationWarning

__all__ = [
    "CachedDecodingStep",
    "ExportError",
    "InverseSqrtSchedule",
    "RESERVED_TOKENS",
    "SENTINEL_TOKEN_FORMAT",
    "SmoothedSparseCategoricalCrossentropy",
    "SynthesizerBackbone",
    "SynthesizerByteTokenizer",
    "SynthesizerCausalLM",
    "SynthesizerCausalLMBackbone",
    "SynthesizerCausalLMPreprocessor",
    "SynthesizerCharTokenizer",
    "SynthesizerMaskedLM",
    "SynthesizerMaskedLMPreprocessor",
    "SynthesizerSeq2SeqBackbone",
    "SynthesizerSeq2SeqLM",
    "SynthesizerSeq2SeqLMPreprocessor",
    "SynthesizerSpanCorruptionPreprocessor",
    "SynthesizerTextClassifier",
    "SynthesizerTextClassifierPreprocessor",
    "SynthesizerTokenizer",
    "TruncationWarning",
    "convert_keras_hub_backbone",
    "export_generator",
    "export_model",
    "export_text_classifier",
    "input_specs",
    "learn_wordpiece_vocabulary",
    "load_export",
    "random_spans_noise_mask",
    "sentinel_tokens",
    "span_corruption_counts",
    "span_corruption_lengths",
    "span_corruption_text_length",
]

# The package's other keras-hub classes too, for keras-hub's loaders.
_lazy.load_all()
