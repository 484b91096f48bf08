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
    `enable_lora(rank)` freezes `W2` (and the hidden projection, unless it
    gets LoRA of its own: `Backbone.enable_lora` targets it by its name
    `"hidden"`) and adds `A (H, k, rank)`, `B (H, rank, ℓ)`:
    `W2_h + (alpha / rank) A_h B_h`; `b2` stays trainable, as a `Dense`
    layer's bias under LoRA.
    """

    applies_scale = True
    bilinear = True
    lora_weights = ("kernel",)
    lora_mergeable = True
    lora_regularized = True
    stored_weights = ("kernel", "bias")

    def build(self, query_shape, key_shape):
        self.hidden = self.built_projection("hidden", "relu", query_shape)
        self.kernel, self.bias = self.add_kernel_and_bias("", self.max_length)

    @classmethod
    def lora_layer_names(cls):
        """The synthesizer (its `W2`) and its hidden projection."""
        return (cls.variant, "hidden")

    def lora_shape(self):
        return (self.num_heads, self.key_dim, self.max_length)

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform",
                    b_initializer="zeros"):
        super().enable_lora(rank, lora_alpha, a_initializer, b_initializer)
        if not self.hidden.lora_enabled:
            self.hidden.trainable = False

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
        kernel = ops.slice(self.kernel.value, (0, 0, 0),
                           (self.num_heads, self.key_dim, key_length))
        if self.lora_enabled:
            kernel = kernel + self.lora_delta(column_count=key_length)
        kernel = scaled(kernel, scale, 0)
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
