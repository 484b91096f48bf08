"""Public layers of keras-synth.

`SynthesizerEncoder` and `SynthesizerDecoder` subclass keras-nlp blocks and
need keras-hub (`pip install "keras-synth[nlp]"`): they are imported on
first use, so that `import keras_synth.layers` imports neither keras-hub nor
TensorFlow (on the JAX and PyTorch backends).
"""

from keras_synth import _lazy
from keras_synth.layers.attention import SynthesizerAttention
from keras_synth.layers.synthesizers import VARIANTS
from keras_synth.layers.synthesizers import Synthesizer
from keras_synth.layers.synthesizers import get_synthesizer
from keras_synth.layers.synthesizers import register_synthesizer
from keras_synth.layers.synthesizers import registered_synthesizers

__all__ = [
    "SynthesizerAttention",
    "SynthesizerEncoder",
    "SynthesizerDecoder",
    "Synthesizer",
    "VARIANTS",
    "get_synthesizer",
    "register_synthesizer",
    "registered_synthesizers",
]

# Imported on first use (`keras_synth._lazy`), with keras-hub.
_LAZY = {
    "SynthesizerEncoder": "keras_synth.layers.blocks:SynthesizerEncoder",
    "SynthesizerDecoder": "keras_synth.layers.blocks:SynthesizerDecoder",
    "blocks": "keras_synth.layers.blocks",
}


def __getattr__(name):
    return _lazy.lazy_attribute(__name__, name, _LAZY)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
