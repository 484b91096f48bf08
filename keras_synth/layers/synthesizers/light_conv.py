"""Lightweight convolution: `L_h[t, s] = w_h[s - t + before]` in a window
of `kernel_size` keys."""

from keras import ops

from keras_synth.layers.synthesizers.convolution import ConvolutionSynthesizer
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("light_conv")
class LightConvSynthesizer(ConvolutionSynthesizer):
    """Lightweight convolution (Wu et al., 2019) as a synthesizer.

    Each head `h` learns one kernel `w_h` of `K = kernel_size` logits,
    shared by all the channels of the head's values:
    `L_h[t, s] = w_h[s - t + before]` for the keys `s` of the window of `t`
    (`padding`: `"centered"` or `"causal"`), `-inf` outside it. The
    layer's softmax over the keys is then LightConv's softmax over the
    kernel; at the edges of the sequence (and where masks remove keys) it
    is normalised over the keys of the window that remain. The logits do
    not depend on the input: `(H, T, S)`, for any length (no `max_length`).

    Weight: `kernel (H, K)`. Options: `kernel_size` (default 3) and
    `padding` (default `"centered"`).

    Example:

    >>> import numpy as np
    >>> from keras_synth.layers import SynthesizerAttention
    >>> layer = SynthesizerAttention(
    ...     num_heads=2, key_dim=8, synthesizer="light_conv",
    ...     synthesizer_options={"kernel_size": 3, "padding": "causal"})
    >>> x = np.random.rand(2, 50, 16).astype("float32")
    >>> tuple(layer(x, x).shape)
    (2, 50, 16)
    """

    batch_dependent = False
    stored_weights = ("kernel",)

    def build(self, query_shape, key_shape):
        self.kernel = self.add_logit_weight(
            "kernel", (self.num_heads, self.kernel_size),
            self.sublayer_kwargs["kernel_initializer"])

    def zero_logits(self):
        """`w = 0`: the window's keys get equal weights (and a gradient)."""
        self.assign_zeros(self.kernel)

    def tap_logits(self, query, query_start, query_length):
        return self.kernel.value  # (H, K)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        taps, inside = self.taps(query_start, query_length, key_length)
        logits = ops.take(self.kernel.value, taps, axis=1)  # (H, T, S)
        return ops.where(inside, logits, ops.zeros_like(logits))
