"""keras-nlp Transformer blocks with synthesized self-attention (keras-hub)."""

from keras_synth.layers.blocks.decoder import SynthesizerDecoder
from keras_synth.layers.blocks.encoder import SynthesizerEncoder

__all__ = ["SynthesizerDecoder", "SynthesizerEncoder"]
