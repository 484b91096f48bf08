"""Synthesizer backbones, tasks, preprocessors and tokenizers in keras-hub's
model API (`pip install "keras-synth[nlp]"`)."""

from keras_synth.models.generation_export import export_generator
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
from keras_synth.models.synthesizer_causal_lm import SynthesizerCausalLM
from keras_synth.models.synthesizer_causal_lm_backbone import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_causal_lm_preprocessor import (
    SynthesizerCausalLMPreprocessor,
)
from keras_synth.models.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)
from keras_synth.models.synthesizer_seq2seq_backbone import (
    SynthesizerSeq2SeqBackbone,
)
from keras_synth.models.synthesizer_seq2seq_lm import SynthesizerSeq2SeqLM
from keras_synth.models.synthesizer_seq2seq_lm_preprocessor import (
    SynthesizerSeq2SeqLMPreprocessor,
)
from keras_synth.models.smoothed_cross_entropy import (
    SmoothedSparseCategoricalCrossentropy,
)
from keras_synth.models.synthesizer_tokenizer import RESERVED_TOKENS
from keras_synth.models.synthesizer_tokenizer import SynthesizerTokenizer
from keras_synth.models.wordpiece_vocabulary import (
    learn_wordpiece_vocabulary,
)

__all__ = [
    "RESERVED_TOKENS",
    "SmoothedSparseCategoricalCrossentropy",
    "SynthesizerBackbone",
    "SynthesizerCausalLM",
    "SynthesizerCausalLMBackbone",
    "SynthesizerCausalLMPreprocessor",
    "SynthesizerCharTokenizer",
    "SynthesizerSeq2SeqBackbone",
    "SynthesizerSeq2SeqLM",
    "SynthesizerSeq2SeqLMPreprocessor",
    "SynthesizerTextClassifier",
    "SynthesizerTextClassifierPreprocessor",
    "SynthesizerTokenizer",
    "export_generator",
    "export_text_classifier",
    "learn_wordpiece_vocabulary",
]
