"""Factorized dense: `row[j] = b1[j // b] * b2[j % b]`, columns `[:S]`."""

import math

from keras import ops

from keras_synth.layers.keras_utils import is_int
from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("factorized_dense")
class FactorizedDenseSynthesizer(Synthesizer):
    """Factorized dense: `row[j] = b1[j // b] * b2[j % b]`, columns `[:S]`.

    `A = relu(W0_h x_t)`, `b1 = W1_h A` of size `a`, `b2 = W2_h A` of size
    `b`. Weights: `hidden/kernel (d, H, k)`, `kernel_a (H, k, a)`,
    `kernel_b (H, k, b)` and their biases.

    Options:
        sizes: `(a, b)` with `a * b >= max_length`. Defaults to
            `(ceil(sqrt(ℓ)), ceil(ℓ / a))`.
    """

    applies_scale = True
    defaults = {"sizes": None}

    @classmethod
    def resolve_options(cls, options, max_length):
        resolved = super().resolve_options(options, max_length)
        sizes = resolved["sizes"]
        if sizes is None:
            a = int(math.ceil(math.sqrt(max_length)))
            resolved["sizes"] = (a, int(math.ceil(max_length / a)))
            return resolved
        try:
            checked = tuple(sizes)
        except TypeError:
            checked = ()
        if len(checked) != 2 or not all(is_int(s) and s > 0 for s in checked):
            raise ValueError(
                "Received an invalid value for option `sizes` of "
                "'factorized_dense', expected two positive integers (a, b). "
                f"Received: sizes={sizes!r}"
            )
        if checked[0] * checked[1] < max_length:
            raise ValueError(
                "Option `sizes` of 'factorized_dense' cannot cover "
                f"max_length={max_length}: expected a * b >= max_length, "
                f"received sizes={checked} "
                f"(a * b = {checked[0] * checked[1]})."
            )
        resolved["sizes"] = checked
        return resolved

    def build(self, query_shape, key_shape):
        self.hidden = self.built_projection("hidden", "relu", query_shape)
        self.kernels, self.biases = [], []
        for name, size in zip(("a", "b"), self.options["sizes"]):
            kernel, bias = self.add_kernel_and_bias(f"_{name}", size)
            self.kernels.append(kernel)
            if bias is not None:
                self.biases.append(bias)

    @classmethod
    def lora_layer_names(cls):
        """The hidden projection (the bulk of the variant's weights; its
        small `(H, k, a)`, `(H, k, b)` kernels stay frozen)."""
        return ("hidden",)

    def zero_logits(self):
        """`W2_b = 0, b_b = 0` (the `a` factor keeps their gradient
        non-zero)."""
        self.assign_zeros(self.kernels[1], *self.biases[1:])

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        hidden = ops.cast(self.hidden(query), self.logits_dtype)
        factors = []
        for i, kernel in enumerate(self.kernels):
            factor = ops.einsum("btnk,nka->bnta", hidden, kernel)
            if self.biases:
                factor = factor + ops.expand_dims(self.biases[i], 1)
            factors.append(factor)
        factors[0] = scaled(factors[0], scale, 1)  # (B, H, T, a)
        return factorized_rows(factors[0], factors[1], self.options["sizes"],
                               key_length)

    def flops(self, batch_size, query_length, key_length, input_dim):
        """The hidden projection, the two factors and their `a x b` outer
        product."""
        heads, k = self.num_heads, self.key_dim
        a, b = self.options["sizes"]
        rows = batch_size * heads * query_length
        return (2 * batch_size * query_length * input_dim * heads * k
                + 2 * rows * k * (a + b) + rows * a * b)


def factorized_rows(left, right, sizes, key_length):
    """`rows[..., j] = left[..., j // b] * right[..., j % b]` for `j < S`.

    Forward, as the product of two matrix products with one-hot expansions
    `E1[i, j] = (j // b == i)` and `E2[i, j] = (j % b == i)`, `(a, S)` and
    `(b, S)`: the rows come out contiguous and already `S` long. As a
    broadcast outer product reshaped and sliced to `S`, XLA's CPU backend
    recomputes it inside every consumer (the softmax's max and exp) with
    per-element index arithmetic, which is slower (docs/benchmark.md).
    Backward, from the factors and the upstream gradient viewed as an
    `(a, b)` grid (padded from `S` to `a * b`), so that the `B x H x T x S`
    expansions are never kept for the gradient (they would raise the peak
    memory of a training step).
    """
    a, b = sizes

    @ops.custom_gradient
    def rows(left, right):
        # The expansions are built here, not closed over: a custom gradient
        # that closes over traced values cannot be exported (jax2tf).
        keys = ops.arange(0, key_length)
        expansions = [
            ops.cast(ops.expand_dims(index, 0)
                     == ops.expand_dims(ops.arange(0, size), 1), left.dtype)
            for index, size in ((keys // b, a), (keys % b, b))
        ]

        def grad(*args, upstream=None):
            if upstream is None:  # TensorFlow and JAX pass it positionally.
                (upstream,) = args
            shape = tuple(ops.shape(upstream))[:-1]
            if not (is_int(key_length) and key_length == a * b):
                upstream = ops.concatenate([
                    upstream,
                    ops.zeros(shape + (a * b - key_length,), upstream.dtype),
                ], axis=-1)
            grid = ops.reshape(upstream, shape + (a, b))
            return (ops.einsum("...ij,...j->...i", grid, right),
                    ops.einsum("...ij,...i->...j", grid, left))

        return (ops.einsum("...i,is->...s", left, expansions[0])
                * ops.einsum("...i,is->...s", right, expansions[1])), grad

    return rows(left, right)
