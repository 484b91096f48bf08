"""Vanilla: dot-product attention, `L = (X W_Q)(M W_K)^T / sqrt(k)`."""

from keras import ops

from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("vanilla")
class VanillaSynthesizer(Synthesizer):
    """Dot-product attention: `L = (X W_Q)(M W_K)^T / sqrt(k)`.

    Weights: `query/kernel (d, H, k)`, `key/kernel (d_key, H, k)` (and
    biases). No options.
    """

    applies_scale = True
    uses_keys = True
    bilinear = True
    needs_max_length = False

    @classmethod
    def lora_layer_names(cls):
        """The query and key projections."""
        return ("query", "key")

    def build(self, query_shape, key_shape):
        self.query_dense = self.built_projection("query", None, query_shape)
        self.key_dense = self.built_projection("key", None, key_shape)

    def zero_logits(self):
        """`W_Q = 0` and its bias (the keys keep their gradient non-zero)."""
        self.assign_zeros(self.query_dense.kernel, self.query_dense.bias)

    def project_key(self, key):
        return self.key_dense(key)

    def scaled_query(self, query, scale=None):
        """`X W_Q / sqrt(k)` `(B, T, H, k)`, times `scale` per head."""
        query = ops.cast(self.query_dense(query), self.logits_dtype)
        factor = 1.0 / float(self.key_dim) ** 0.5
        if scale is None:
            return ops.multiply(query, factor)
        return scaled(query, ops.multiply(scale, factor), 2)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        query = self.scaled_query(query, scale)
        key = ops.cast(key, self.logits_dtype)
        return ops.einsum("btnk,bsnk->bnts", query, key)

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        query = self.scaled_query(query, scale)
        key = ops.cast(key, self.logits_dtype)
        return (ops.transpose(query, (0, 2, 1, 3)),
                ops.transpose(key, (0, 2, 3, 1)))

    def flops(self, batch_size, query_length, key_length, input_dim):
        """The query and key projections and `Q K^T`."""
        heads, k = self.num_heads, self.key_dim
        projections = 2 * batch_size * (query_length + key_length) * (
            input_dim * heads * k)
        return projections + 2 * batch_size * heads * query_length * (
            key_length * k)
