"""`SynthesizerAttention` and its parts: argument checks, masks, the cache
for decoding, and the attention paths (general, batch-shared, query-blocked)."""

from keras_synth.layers.attention.synthesizer_attention import (
    SynthesizerAttention,
)

__all__ = ["SynthesizerAttention"]
