"""Synthesizer backbones, tasks, preprocessors and tokenizers in keras-hub's
model API (`pip install "keras-synth[nlp]"`)."""

# The encoder family first: the WordPiece tokenizer names the encoder
# backbone, and the encoder family's preprocessor names the tokenizer; only
# this order resolves that cycle.
from keras_synth.models import synthesizer_encoder  # noqa: F401, I001
from keras_synth import _lazy
from keras_synth.models.generation_export import export_generator
from keras_synth.models.losses import SmoothedSparseCategoricalCrossentropy
from keras_synth.models.synthesizer_causal_lm import SynthesizerCausalLM
from keras_synth.models.synthesizer_causal_lm import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_causal_lm import (
    SynthesizerCausalLMPreprocessor,
)
from keras_synth.models.synthesizer_encoder import SynthesizerBackbone
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
from keras_synth.models.tokenizers import RESERVED_TOKENS
from keras_synth.models.tokenizers import SynthesizerCharTokenizer
from keras_synth.models.tokenizers import SynthesizerTokenizer
from keras_synth.models.tokenizers import learn_wordpiece_vocabulary

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

# The package's other keras-hub classes too, for keras-hub's loaders.
_lazy.load_all()
