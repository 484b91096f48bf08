"""Reference attention layers of the benchmark's training rows, written
directly with `keras.ops` (no keras-synth code), timed next to
`keras.layers.MultiHeadAttention` (`--references`):

- `Linformer` (`linformer`): Wang, Li, Khabsa, Fang, Ma, "Linformer:
  Self-Attention with Linear Complexity", arXiv 2006.04768 (2020).
- `LightConv` (`lightconv`) and `DynamicConv` (`dynamicconv`): Wu, Fan,
  Baevski, Dauphin, Auli, "Pay Less Attention with Lightweight and Dynamic
  Convolutions", ICLR 2019 (arXiv 1901.10430), as depthwise convolutions
  over the values with Wu et al.'s zero padding. keras-synth's own
  `light_conv` and `dynamic_conv` synthesizers are other rows
  (`--variants`); they differ at the edges of the sequence and under masks,
  where the synthesizers renormalise the softmax over the keys that exist
  and these layers let missing keys contribute zero.

Each layer is called as the benchmark calls its rows, `layer(x, x,
value_mask=..., use_causal_mask=..., training=...)`, with `num_heads`
heads of `key_dim` features, value and output projections as
MultiHeadAttention's (`(d, H, k)` kernels and `(H, k)` biases, output
`(H, k, d)` and `(d,)`). `forward_flops` counts a forward pass (matmuls and
convolutions only, as the benchmark counts).
"""

import math

import keras
from keras import ops

from recipes.benchmark.flags import REFERENCES

PADDINGS = ("centered", "causal")


def _positive_int(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"Received an invalid value for argument `{name}` of {owner}, "
            f"expected a positive integer. Received: {name}={value!r}")


class _Projections(keras.layers.Layer):
    """The value and output projections the reference layers share (and
    Linformer's query and key projections)."""

    def __init__(self, num_heads, key_dim, use_bias=True,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        owner = type(self).__name__
        _positive_int(owner, "num_heads", num_heads)
        _positive_int(owner, "key_dim", key_dim)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _projection(self, name, input_dim):
        kernel = self.add_weight(
            name=f"{name}_kernel",
            shape=(input_dim, self.num_heads, self.key_dim),
            initializer=self.kernel_initializer)
        bias = self.add_weight(
            name=f"{name}_bias", shape=(self.num_heads, self.key_dim),
            initializer="zeros") if self.use_bias else None
        return kernel, bias

    def _build_value_and_output(self, input_dim):
        self.value_kernel, self.value_bias = self._projection(
            "value", input_dim)
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=(self.num_heads, self.key_dim, input_dim),
            initializer=self.kernel_initializer)
        self.output_bias = self.add_weight(
            name="output_bias", shape=(input_dim,),
            initializer="zeros") if self.use_bias else None

    @staticmethod
    def _project(x, kernel, bias):
        y = ops.einsum("bsd,dhk->bshk", x, kernel)
        return y if bias is None else y + bias

    def _output(self, heads):
        y = ops.einsum("bthk,hkd->btd", heads, self.output_kernel)
        return y if self.output_bias is None else y + self.output_bias

    @staticmethod
    def _zero_masked(x, value_mask):
        """`x (B, S, ...)` with the positions that `value_mask (B, S)`
        marks False set to zero."""
        if value_mask is None:
            return x
        mask = ops.cast(value_mask, x.dtype)
        return x * ops.reshape(mask, ops.shape(mask) + (1,) * (
            len(x.shape) - 2))

    def compute_output_shape(self, query_shape, value_shape=None):
        return query_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads, "key_dim": self.key_dim,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
        })
        return config


class Linformer(_Projections):
    """Linformer self-attention (Wang et al. 2020, arXiv 2006.04768).

    Keys and values are projected along the length, from `n = max_length`
    positions to `k = projected_length` rows, by learned `E, F` of shape
    `(k, n)`; each head then attends over the `k` projected positions:

        head_h = softmax((X W_Q,h) (E X W_K,h)^T / sqrt(d_h)) (F X W_V,h)

    `E` and `F` are shared by the heads (the paper's "headwise sharing").
    A sequence of `S < n` keys uses the first `S` columns of `E` and `F`.
    With `value_mask`, padded keys and values are zeroed before the
    projection. Linformer has no causal form (every projected row mixes
    all positions): `use_causal_mask=True` is an error.

    Weights: `query_kernel`, `key_kernel`, `value_kernel` `(d, H, d_h)`
    and their biases `(H, d_h)`, `E` and `F` `(k, n)`, `output_kernel`
    `(H, d_h, d)` and `output_bias (d,)`.
    """

    def __init__(self, num_heads, key_dim, max_length, projected_length=256,
                 **kwargs):
        super().__init__(num_heads, key_dim, **kwargs)
        _positive_int("Linformer", "max_length", max_length)
        _positive_int("Linformer", "projected_length", projected_length)
        self.max_length = max_length
        self.projected_length = projected_length

    def build(self, query_shape, value_shape=None):
        input_dim = query_shape[-1]
        self.query_kernel, self.query_bias = self._projection(
            "query", input_dim)
        self.key_kernel, self.key_bias = self._projection("key", input_dim)
        self._build_value_and_output(input_dim)
        shape = (self.projected_length, self.max_length)
        self.e = self.add_weight(name="E", shape=shape,
                                 initializer=self.kernel_initializer)
        self.f = self.add_weight(name="F", shape=shape,
                                 initializer=self.kernel_initializer)

    def call(self, query, value, value_mask=None, use_causal_mask=False,
             training=None):
        return self._attend(query, value, value_mask, use_causal_mask,
                            training)[0]

    def _attend(self, query, value, value_mask, use_causal_mask, training):
        """`(outputs (B, T, d), probabilities (B, H, T, k))`."""
        if use_causal_mask:
            raise ValueError(
                "Linformer has no causal form (each projected key mixes all "
                "positions). Received: use_causal_mask=True")
        length = value.shape[1]
        if length is not None and length > self.max_length:
            raise ValueError(
                f"Linformer(max_length={self.max_length}) received a value "
                f"sequence of length {length}; expected at most max_length.")
        q = self._project(query, self.query_kernel, self.query_bias)
        k = self._zero_masked(
            self._project(value, self.key_kernel, self.key_bias), value_mask)
        v = self._zero_masked(
            self._project(value, self.value_kernel, self.value_bias),
            value_mask)
        length = ops.shape(value)[1]
        k = ops.einsum("ps,bshk->bphk", self.e[:, :length], k)
        v = ops.einsum("ps,bshk->bphk", self.f[:, :length], v)
        logits = ops.einsum("bthk,bphk->bhtp", q, k)
        logits = ops.cast(logits, "float32") / math.sqrt(self.key_dim)
        probabilities = ops.softmax(logits, axis=-1)
        probs = ops.cast(self._drop(probabilities, training), v.dtype)
        return (self._output(ops.einsum("bhtp,bphk->bthk", probs, v)),
                probabilities)

    def _drop(self, probabilities, training):
        """Dropout of the attention probabilities `(B, H, T, k)`: none
        here (a subclass's hook, e.g. `recipes.lra.linformer`)."""
        return probabilities

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length,
                       "projected_length": self.projected_length})
        return config


class _Convolution(_Projections):
    """What LightConv and DynamicConv share: the window of `kernel_size`
    taps (`padding="centered"`: keys `t - (K - 1) // 2 ... t + K // 2`;
    `"causal"`: `t - K + 1 ... t`), zero padding at the edges, and masks:
    `value_mask` zeroes padded values, `use_causal_mask` zeroes the taps
    after `t`. Self-attention only: the query and value lengths are one."""

    def __init__(self, num_heads, key_dim, kernel_size=3, padding="centered",
                 **kwargs):
        super().__init__(num_heads, key_dim, **kwargs)
        owner = type(self).__name__
        _positive_int(owner, "kernel_size", kernel_size)
        if padding not in PADDINGS:
            raise ValueError(
                f"Received an invalid value for argument `padding` of "
                f"{owner}, expected one of {PADDINGS}. Received: "
                f"padding={padding!r}")
        self.kernel_size = kernel_size
        self.padding = padding

    @property
    def sides(self):
        """`(before, after)`: the taps of query `t` are keys
        `t - before ... t + after`."""
        k = self.kernel_size
        return (k - 1, 0) if self.padding == "causal" else (
            (k - 1) // 2, k // 2)

    def _causal_taps(self, dtype):
        """`(K,)`: 1 for the taps at or before `t`, 0 after it."""
        before, _ = self.sides
        return ops.cast(ops.arange(self.kernel_size) <= before, dtype)

    def _check_lengths(self, query, value):
        t, s = query.shape[1], value.shape[1]
        if t is not None and s is not None and t != s:
            raise ValueError(
                f"{type(self).__name__} is self-attention: the query and "
                f"value lengths must be equal. Received: query length {t}, "
                f"value length {s}")

    def get_config(self):
        config = super().get_config()
        config.update({"kernel_size": self.kernel_size,
                       "padding": self.padding})
        return config


class LightConv(_Convolution):
    """Lightweight convolution (Wu et al. 2019, arXiv 1901.10430) in the
    place of attention: values `V = X W_V + b_V` (`H` heads of `d_h`
    channels), per head one kernel `w_h (K,)` normalised by a softmax over
    its taps and shared by the head's channels, a depthwise convolution
    (`keras.ops.depthwise_conv`) with zero padding, then the output
    projection:

        y_h[t] = sum_j softmax(w_h)_j V_h[t + j - before]

    Weights: `value_kernel (d, H, d_h)`, `value_bias (H, d_h)`,
    `conv_kernel (H, K)`, `output_kernel (H, d_h, d)`, `output_bias (d,)`.
    """

    def build(self, query_shape, value_shape=None):
        self._build_value_and_output(query_shape[-1])
        self.conv_kernel = self.add_weight(
            name="conv_kernel", shape=(self.num_heads, self.kernel_size),
            initializer=self.kernel_initializer)

    def call(self, query, value, value_mask=None, use_causal_mask=False,
             training=None):
        self._check_lengths(query, value)
        v = self._zero_masked(
            self._project(value, self.value_kernel, self.value_bias),
            value_mask)
        weights = ops.softmax(ops.cast(self.conv_kernel, "float32"), axis=-1)
        if use_causal_mask:
            weights = weights * self._causal_taps(weights.dtype)
        weights = ops.cast(weights, v.dtype)  # (H, K)
        h, k, size = self.num_heads, self.key_dim, self.kernel_size
        # (K, H * d_h, 1): the head's taps repeated over its channels.
        kernel = ops.reshape(
            ops.repeat(ops.transpose(weights)[:, :, None], k, axis=2),
            (size, h * k, 1))
        batch, length = ops.shape(v)[0], ops.shape(v)[1]
        before, after = self.sides
        flat = ops.pad(ops.reshape(v, (batch, length, h * k)),
                       [[0, 0], [before, after], [0, 0]])
        heads = ops.depthwise_conv(flat, kernel, strides=1, padding="valid",
                                   data_format="channels_last")
        return self._output(ops.reshape(heads, (batch, length, h, k)))


class DynamicConv(_Convolution):
    """Dynamic convolution (Wu et al. 2019, arXiv 1901.10430) in the place
    of attention: as `LightConv`, but each position predicts its own
    kernels from the query token, `W_dyn x_t + b_dyn -> (H, K)`, normalised
    by a softmax over the taps; the values are summed over `K` shifted
    copies (zero padded):

        y_h[t] = sum_j softmax(W_dyn,h x_t + b_dyn,h)_j V_h[t + j - before]

    Weights: `value_kernel`, `value_bias`, `dynamic_kernel (d, H, K)`,
    `dynamic_bias (H, K)`, `output_kernel`, `output_bias`.
    """

    def build(self, query_shape, value_shape=None):
        input_dim = query_shape[-1]
        self._build_value_and_output(input_dim)
        self.dynamic_kernel = self.add_weight(
            name="dynamic_kernel",
            shape=(input_dim, self.num_heads, self.kernel_size),
            initializer=self.kernel_initializer)
        self.dynamic_bias = self.add_weight(
            name="dynamic_bias", shape=(self.num_heads, self.kernel_size),
            initializer="zeros") if self.use_bias else None

    def call(self, query, value, value_mask=None, use_causal_mask=False,
             training=None):
        self._check_lengths(query, value)
        v = self._zero_masked(
            self._project(value, self.value_kernel, self.value_bias),
            value_mask)
        logits = self._project(query, self.dynamic_kernel, self.dynamic_bias)
        weights = ops.softmax(ops.cast(logits, "float32"), axis=-1)
        if use_causal_mask:
            weights = weights * self._causal_taps(weights.dtype)
        weights = ops.cast(weights, v.dtype)  # (B, T, H, K)
        length = v.shape[1]
        before, after = self.sides
        padded = ops.pad(v, [[0, 0], [before, after], [0, 0], [0, 0]])
        heads = 0
        for j in range(self.kernel_size):
            heads = heads + weights[..., j:j + 1] * padded[:, j:j + length]
        return self._output(heads)


def make_reference(name, num_heads, key_dim, max_length, kernel_size=3,
                   padding="centered", projected_length=256, dtype=None):
    """The reference layer of row `name` (one of `REFERENCES`)."""
    if name == "linformer":
        return Linformer(num_heads, key_dim, max_length,
                         projected_length=projected_length, dtype=dtype,
                         name=name)
    if name in ("lightconv", "dynamicconv"):
        cls = LightConv if name == "lightconv" else DynamicConv
        return cls(num_heads, key_dim, kernel_size=kernel_size,
                   padding=padding, dtype=dtype, name=name)
    raise ValueError(
        f"Unknown reference row {name!r}; expected one of {REFERENCES}.")


def forward_flops(name, batch, length, width, heads, kernel_size=3,
                  projected_length=256):
    """Multiply-adds x 2 of one forward pass of reference row `name`:
    matmuls and convolutions only (softmax and elementwise work are not
    counted, as for the other rows)."""
    b, n, d, h = batch, length, width, heads
    k = d // h
    value_and_output = 2 * 2 * b * n * d * h * k
    if name == "linformer":
        p = projected_length
        return (2 * value_and_output  # Q, K, V and output projections
                + 2 * 2 * b * h * p * n * k  # E K and F V
                + 2 * 2 * b * h * n * p * k)  # logits, probs x values
    taps = 2 * b * n * h * k * kernel_size
    if name == "lightconv":
        return value_and_output + taps
    if name == "dynamicconv":
        return value_and_output + taps + 2 * b * n * d * h * kernel_size
    raise ValueError(
        f"Unknown reference row {name!r}; expected one of {REFERENCES}.")
