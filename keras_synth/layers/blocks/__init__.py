"""keras-nlp Transformer blocks with synthesized self-attention (keras-hub)."""

from keras_synth import _lazy
from keras_synth.layers.blocks.decoder import SynthesizerDecoder
from keras_synth.layers.blocks.encoder import SynthesizerEncoder

__all__ = ["SynthesizerDecoder", "SynthesizerEncoder"]

# The package's other keras-hub classes too, for keras-hub's loaders.
_lazy.load_all()
