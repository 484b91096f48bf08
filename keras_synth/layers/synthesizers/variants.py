"""The synthesizers: each one turns its inputs into attention logits.

Every class here owns the weights of one variant of the paper (docs/design.md,
"The variants") and computes that variant's logits in one short `logits`
method, whose docstring gives its formula. `SynthesizerAttention` composes
them; the classes are shared within this package, not exported.

Shapes (docs/design.md notation): the query input is `(B, T, d)`, projected keys are
`(B, S, H, k)`. `logits` returns `(B, H, T, S)` for variants that depend on
the input and `(H, T, S)` for those that do not (`batch_dependent = False`),
always in `logits_dtype` (float32 under mixed precision).
"""

import keras
from keras import ops

from keras_synth.layers.keras_utils import clone_initializer
from keras_synth.layers.keras_utils import is_int

VARIANTS = (
    "dense",
    "random",
    "fixed_random",
    "factorized_dense",
    "factorized_random",
    "vanilla",
)


class EinsumDense(keras.layers.EinsumDense):
    """`keras.layers.EinsumDense` whose bias broadcasts like NumPy everywhere.

    On TensorFlow, `keras.ops.add(x, bias)` (used by Keras' `EinsumDense`)
    turns into `tf.nn.bias_add` whenever the bias squeezes to one dimension
    that matches `x.shape[1]` or `x.shape[-1]`; for a per-head bias of shape
    `(H, 1)` (`key_dim` or `value_dim` 1) and a sequence of length `H` it
    adds the bias along the sequence axis instead of the head axis. The plain
    `+` of backend tensors broadcasts correctly on every backend.
    """

    def call(self, inputs, training=None):
        if self.bias is None:
            return super().call(inputs, training=training)
        x = ops.einsum(self.equation, inputs, self.kernel)
        x = x + ops.convert_to_tensor(self.bias.value, dtype=x.dtype)
        if self.activation is not None:
            x = self.activation(x)
        return x


def _query_projection(num_heads, key_dim, use_bias, name, activation, kw):
    """An `EinsumDense` from `(B, T, d)` to `(B, T, H, k)`, named like MHA's."""
    return EinsumDense(
        "btd,dnk->btnk",
        output_shape=(None, num_heads, key_dim),
        bias_axes="nk" if use_bias else None,
        activation=activation,
        name=name,
        **kw,
    )


class Synthesizer(keras.layers.Layer):
    """Base class of the synthesizers.

    Args:
        num_heads: number of heads `H`.
        key_dim: size per head `k` of the query-side projections.
        max_length: `ℓ`, the longest query and key length.
        use_bias: whether projections have biases.
        logits_dtype: dtype of the returned logits.
        sublayer_kwargs: keyword arguments for the `EinsumDense` sublayers
            (initializers, regularizers, constraints, dtype policy).
        random_initializer: initializer of random logits and factors.
    """

    variant = None
    # Whether the logits depend on the input (shape B x H x T x S) or not
    # (shape H x T x S).
    batch_dependent = True
    # Whether the logits need the projected keys (dot-product attention).
    uses_keys = False
    # Whether `factors` gives the logits as a product of two factors.
    bilinear = False

    def __init__(
        self,
        num_heads,
        key_dim,
        max_length,
        use_bias,
        logits_dtype,
        sublayer_kwargs,
        random_initializer,
        **kwargs,
    ):
        super().__init__(name=self.variant, **kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.max_length = max_length
        self.use_bias = use_bias
        self.logits_dtype = logits_dtype
        self.sublayer_kwargs = sublayer_kwargs
        self.random_initializer = random_initializer

    def _add_logit_weight(self, name, shape, initializer, trainable=True,
                          regularized=True):
        """A weight of the logit path, kept in float32 (never autocast)."""
        kw = self.sublayer_kwargs
        is_bias = name.startswith("bias")
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=keras.initializers.get(initializer),
            regularizer=(
                kw["bias_regularizer" if is_bias else "kernel_regularizer"]
                if regularized
                else None
            ),
            constraint=(
                kw["bias_constraint" if is_bias else "kernel_constraint"]
                if regularized
                else None
            ),
            trainable=trainable,
            dtype=self.logits_dtype,
            autocast=False,
        )

    def _dense_kwargs(self):
        kw = dict(self.sublayer_kwargs)
        kw["kernel_initializer"] = clone_initializer(kw["kernel_initializer"])
        kw["bias_initializer"] = clone_initializer(kw["bias_initializer"])
        return kw

    def _built_projection(self, name, activation, input_shape):
        """A built projection from `(B, T, d)` to `(B, T, H, key_dim)`."""
        projection = _query_projection(
            self.num_heads, self.key_dim, self.use_bias, name, activation,
            self._dense_kwargs(),
        )
        projection.build(input_shape)
        return projection

    def _add_kernel_and_bias(self, suffix, size):
        """The `(H, key_dim, size)` kernel and, with `use_bias`, the
        `(H, size)` bias (else `None`) that map the hidden layer to `size`
        logits, named `kernel{suffix}` and `bias{suffix}`."""
        kw = self.sublayer_kwargs
        kernel = self._add_logit_weight(
            f"kernel{suffix}",
            (self.num_heads, self.key_dim, size),
            clone_initializer(kw["kernel_initializer"]),
        )
        bias = None
        if self.use_bias:
            bias = self._add_logit_weight(
                f"bias{suffix}",
                (self.num_heads, size),
                clone_initializer(kw["bias_initializer"]),
            )
        return kernel, bias

    def project_key(self, key):
        """Projects the key input; `None` for synthesizers without keys."""
        return None

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        """Returns the attention logits of this synthesizer.

        Args:
            query: the query input `(B, T, d)`.
            key: projected keys `(B, S, H, k)`, or `None` if `uses_keys` is
                False.
            query_start: position of the first query row (0, or the cache
                index during decoding); an int or a scalar tensor.
            query_length: `T`.
            key_length: `S`.
            scale: optional per-head factors `(H,)` (the mixture weights),
                applied to the smallest tensor that the logits are linear
                in, so that a mixture never rescales `B x H x T x S` logits.
        """
        raise NotImplementedError

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        """The logits as a product `left @ right`, or `None`.

        Synthesizers whose logits are bilinear return `(left, right)`,
        `left (B, H, T, c)` or `(H, T, c)` and `right (B, H, c, S)` or
        `(H, c, S)`, with `left @ right` equal to `logits(...)`. A mixture
        concatenates its components' factors along `c` and contracts them
        once: one `B x H x T x S` product instead of one per component plus
        their sum (forward and backward). Arguments as in `logits`.
        """
        return None


def _scaled(x, scale, head_axis):
    """`x` times `scale (H,)` broadcast along `head_axis` of `x`."""
    if scale is None:
        return x
    shape = [1] * len(x.shape)
    shape[head_axis] = -1
    return x * ops.reshape(ops.cast(scale, x.dtype), shape)


class VanillaSynthesizer(Synthesizer):
    """Dot-product attention: `L = (X W_Q)(M W_K)^T / sqrt(k)`."""

    variant = "vanilla"
    uses_keys = True
    bilinear = True

    def build(self, query_shape, key_shape):
        self.query_dense = self._built_projection("query", None, query_shape)
        self.key_dense = self._built_projection("key", None, key_shape)

    def project_key(self, key):
        return self.key_dense(key)

    def _scaled_query(self, query, scale):
        """`X W_Q / sqrt(k)` `(B, T, H, k)`, times `scale` per head."""
        query = ops.cast(self.query_dense(query), self.logits_dtype)
        factor = 1.0 / float(self.key_dim) ** 0.5
        if scale is None:
            return ops.multiply(query, factor)
        return _scaled(query, ops.multiply(scale, factor), 2)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        query = self._scaled_query(query, scale)
        key = ops.cast(key, self.logits_dtype)
        return ops.einsum("btnk,bsnk->bnts", query, key)

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        query = self._scaled_query(query, scale)
        key = ops.cast(key, self.logits_dtype)
        return (ops.transpose(query, (0, 2, 1, 3)),
                ops.transpose(key, (0, 2, 3, 1)))


class DenseSynthesizer(Synthesizer):
    """Dense: `L_h[t] = W2_h relu(W1_h x_t + b1_h) + b2_h`, columns `[:S]`."""

    variant = "dense"
    bilinear = True

    def build(self, query_shape, key_shape):
        self.hidden = self._built_projection("hidden", "relu", query_shape)
        self.kernel, self.bias = self._add_kernel_and_bias("", self.max_length)

    def _parts(self, query, key_length, scale):
        """`relu(W1 x + b1)` `(B, T, H, k)`, `W2 (H, k, S)` and `b2 (H, S)`
        (or None), the last two times `scale` per head."""
        hidden = ops.cast(self.hidden(query), self.logits_dtype)
        kernel = ops.slice(
            self.kernel.value, (0, 0, 0),
            (self.num_heads, self.key_dim, key_length))
        bias = None
        if self.bias is not None:
            bias = _scaled(ops.slice(
                self.bias.value, (0, 0), (self.num_heads, key_length)
            ), scale, 0)
        return hidden, _scaled(kernel, scale, 0), bias

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        left, right = self.factors(
            query, key, query_start, query_length, key_length, scale)
        # Batched over (b, n), the product comes out as (B, H, T, S): batched
        # over heads alone it would come out (H, B, T, S) and need a
        # transpose of the largest tensor (forward and backward). The
        # broadcast kernel is only B x H x (k + 1) x S. With the bias as a
        # column of the product, its gradient is part of the product's
        # instead of a reduction of B x H x T x S over (b, t), which XLA's
        # CPU backend runs slowly (docs/benchmark.md).
        right = ops.broadcast_to(
            ops.expand_dims(right, 0),
            (ops.shape(left)[0],) + tuple(ops.shape(right)),
        )
        return ops.einsum("bntc,bncs->bnts", left, right)

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        hidden, kernel, bias = self._parts(query, key_length, scale)
        left = ops.transpose(hidden, (0, 2, 1, 3))  # (B, H, T, k)
        if bias is None:
            return left, kernel
        # The bias is one more column: `[hidden, 1] @ [kernel; bias]`.
        left = ops.concatenate([left, ops.ones_like(left[..., :1])], axis=-1)
        return left, ops.concatenate([kernel, ops.expand_dims(bias, 1)], 1)


class FactorizedDenseSynthesizer(Synthesizer):
    """Factorized dense: `row[j] = b1[j // b] * b2[j % b]`, columns `[:S]`.

    `A = relu(W0_h x_t)`, `b1 = W1_h A` of size `a`, `b2 = W2_h A` of size `b`.
    """

    variant = "factorized_dense"

    def __init__(self, *args, sizes, **kwargs):
        super().__init__(*args, **kwargs)
        self.sizes = tuple(sizes)

    def build(self, query_shape, key_shape):
        self.hidden = self._built_projection("hidden", "relu", query_shape)
        self.kernels, self.biases = [], []
        for name, size in zip(("a", "b"), self.sizes):
            kernel, bias = self._add_kernel_and_bias(f"_{name}", size)
            self.kernels.append(kernel)
            if bias is not None:
                self.biases.append(bias)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        hidden = ops.cast(self.hidden(query), self.logits_dtype)
        factors = []
        for i, kernel in enumerate(self.kernels):
            factor = ops.einsum("btnk,nka->bnta", hidden, kernel)
            if self.biases:
                factor = factor + ops.expand_dims(self.biases[i], 1)
            factors.append(factor)
        factors[0] = _scaled(factors[0], scale, 1)  # (B, H, T, a)
        return factorized_rows(factors[0], factors[1], self.sizes,
                                key_length)


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
        keys = ops.arange(key_length)
        expansions = [
            ops.cast(ops.expand_dims(index, 0)
                     == ops.expand_dims(ops.arange(size), 1), left.dtype)
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


class RandomSynthesizer(Synthesizer):
    """Random: `L_h = R_h[:T, :S]` with `R_h` a trainable `ℓ x ℓ` matrix."""

    variant = "random"
    batch_dependent = False
    trainable_logits = True

    def build(self, query_shape, key_shape):
        length = self.max_length
        self.kernel = self._add_logit_weight(
            "logits",
            (self.num_heads, length, length),
            clone_initializer(self.random_initializer),
            trainable=self.trainable_logits,
            regularized=False,
        )

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        return _scaled(ops.slice(
            self.kernel.value,
            (0, query_start, 0),
            (self.num_heads, query_length, key_length),
        ), scale, 0)


class FixedRandomSynthesizer(RandomSynthesizer):
    """Fixed random: as random, but the matrix is never trained (still saved)."""

    variant = "fixed_random"
    trainable_logits = False


class FactorizedRandomSynthesizer(Synthesizer):
    """Factorized random: `L_h = (R1_h R2_h^T)[:T, :S]`, `R1, R2` of rank `r`."""

    variant = "factorized_random"
    batch_dependent = False
    bilinear = True

    def __init__(self, *args, rank, **kwargs):
        super().__init__(*args, **kwargs)
        self.rank = rank

    def build(self, query_shape, key_shape):
        shape = (self.num_heads, self.max_length, self.rank)
        self.left = self._add_logit_weight(
            "left", shape, clone_initializer(self.random_initializer), regularized=False
        )
        self.right = self._add_logit_weight(
            "right", shape, clone_initializer(self.random_initializer), regularized=False
        )

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        heads, rank = self.num_heads, self.rank
        left = _scaled(ops.slice(
            self.left.value, (0, query_start, 0), (heads, query_length, rank)
        ), scale, 0)
        right = ops.slice(self.right.value, (0, 0, 0), (heads, key_length, rank))
        return left, ops.transpose(right, (0, 2, 1))

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        left, right = self.factors(
            query, key, query_start, query_length, key_length, scale)
        return ops.einsum("ntr,nrs->nts", left, right)


SYNTHESIZERS = {
    cls.variant: cls
    for cls in (
        DenseSynthesizer,
        RandomSynthesizer,
        FixedRandomSynthesizer,
        FactorizedDenseSynthesizer,
        FactorizedRandomSynthesizer,
        VanillaSynthesizer,
    )
}
