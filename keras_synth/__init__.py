"""keras-synth: Synthesizer attention for Keras 3."""

from keras_synth import layers
from keras_synth.layers import SynthesizerAttention
from keras_synth.version import __version__

__all__ = ["SynthesizerAttention", "layers", "__version__"]
