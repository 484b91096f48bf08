"""Dynamic convolution: `L_h[t, s] = (W_h x_t + b_h)[s - t + before]` in a
window of `kernel_size` keys."""

from keras import ops

from keras_synth.layers.synthesizers.convolution import ConvolutionSynthesizer
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("dynamic_conv")
class DynamicConvSynthesizer(ConvolutionSynthesizer):
    """Dynamic convolution (Wu et al., 2019) as a synthesizer.

    As `light_conv`, but the kernel is predicted from each query token by a
    linear projection `x_t -> (H, K)`:
    `L_h[t, s] = (W_h x_t + b_h)[s - t + before]` for the keys `s` of the
    window of `t`, `-inf` outside it; softmax over the window, shared by
    the channels of a head. Logits `(B, H, T, S)`, any length.

    Weights: `projection/kernel (d, H, K)` and, with `use_bias`,
    `projection/bias (H, K)`. Options: `kernel_size` (default 3) and `padding`
    (default `"centered"`).

    Example:

    >>> import numpy as np
    >>> from keras_synth.layers import SynthesizerAttention
    >>> layer = SynthesizerAttention(
    ...     num_heads=2, key_dim=8, synthesizer="dynamic_conv+vanilla",
    ...     synthesizer_options={"kernel_size": 5})
    >>> x = np.random.rand(2, 50, 16).astype("float32")
    >>> tuple(layer(x, x).shape)
    (2, 50, 16)
    """

    def build(self, query_shape, key_shape):
        self.projection = self.built_projection(
            "projection", None, query_shape, size=self.kernel_size)

    def zero_logits(self):
        """`W = 0, b = 0` (the gradient of `W` stays non-zero)."""
        self.assign_zeros(self.projection.kernel, self.projection.bias)

    def tap_logits(self, query, query_start, query_length):
        """The predicted kernels `(B, T, H, K)`, in the logits dtype."""
        return ops.cast(self.projection(query), self.logits_dtype)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        taps, inside = self.taps(query_start, query_length, key_length)
        # (T, S, K): key s of row t is tap `taps[t, s]`, if inside.
        select = ops.one_hot(taps, self.kernel_size, dtype=self.logits_dtype)
        select = select * ops.cast(inside, self.logits_dtype)[..., None]
        return ops.einsum("btnk,tsk->bnts", self.tap_logits(
            query, query_start, query_length), select)

    def flops(self, batch_size, query_length, key_length, input_dim):
        """The projection and the placement of the taps."""
        heads, k = self.num_heads, self.kernel_size
        projection = 2 * batch_size * query_length * input_dim * heads * k
        return projection + 2 * batch_size * heads * query_length * (
            key_length * k)
