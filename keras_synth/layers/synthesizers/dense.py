"""Dense: `L_h[t] = W2_h relu(W1_h x_t + b1_h) + b2_h`, columns `[:S]`."""

from keras import ops

from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("dense")
class DenseSynthesizer(Synthesizer):
    """Dense: `L_h[t] = W2_h relu(W1_h x_t + b1_h) + b2_h`, columns `[:S]`.

    Weights: `hidden/kernel (d, H, k)`, `kernel (H, k, ℓ)`, `bias (H, ℓ)`.
    No options (the hidden width is the layer's `key_dim`).
    """

    applies_scale = True
    bilinear = True

    def build(self, query_shape, key_shape):
        self.hidden = self.built_projection("hidden", "relu", query_shape)
        self.kernel, self.bias = self.add_kernel_and_bias("", self.max_length)

    def zero_logits(self):
        """`W2 = 0, b2 = 0`: the hidden layer keeps their gradient non-zero."""
        self.assign_zeros(self.kernel, self.bias)

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        # `[relu(W1 x + b1), 1] @ [W2; b2]`: with the bias as a column of
        # the product, its gradient is part of the product's instead of a
        # reduction of B x H x T x S over (b, t), which XLA's CPU backend
        # runs slowly (docs/benchmark.md).
        hidden = ops.cast(self.hidden(query), self.logits_dtype)
        left = ops.transpose(hidden, (0, 2, 1, 3))  # (B, H, T, k)
        kernel = scaled(ops.slice(
            self.kernel.value, (0, 0, 0),
            (self.num_heads, self.key_dim, key_length)), scale, 0)
        if self.bias is None:
            return left, kernel
        bias = scaled(ops.slice(
            self.bias.value, (0, 0), (self.num_heads, key_length)), scale, 0)
        left = ops.concatenate([left, ops.ones_like(left[..., :1])], axis=-1)
        return left, ops.concatenate([kernel, ops.expand_dims(bias, 1)], 1)

    def flops(self, batch_size, query_length, key_length, input_dim):
        """The hidden projection and the `k -> S` product."""
        heads, k = self.num_heads, self.key_dim
        hidden = 2 * batch_size * query_length * input_dim * heads * k
        return hidden + 2 * batch_size * heads * query_length * key_length * k
