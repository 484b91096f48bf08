"""Public layers of keras-synth."""

from keras_synth.layers.synthesizer_attention import SynthesizerAttention

__all__ = ["SynthesizerAttention"]
