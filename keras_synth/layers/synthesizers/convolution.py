"""What the convolution synthesizers (`light_conv`, `dynamic_conv`) share:
their options, their window of `kernel_size` keys around each query, and
which kernel tap each key of the window uses.

The query at position `t` sees the keys `t - before ... t + after`
(`window_sides`): `before = (K - 1) // 2`, `after = K // 2` with
`padding="centered"`, `before = K - 1`, `after = 0` with `"causal"`. Key `s`
of that window uses tap `s - t + before` of the kernel. Keys outside the
window have logit `-inf`: the layer masks them (`Synthesizer.window`), so
at the edges of the sequence the softmax runs over the keys that exist.
"""

from keras import ops

from keras_synth.layers.keras_utils import is_int
from keras_synth.layers.synthesizers.base import Synthesizer

PADDINGS = ("centered", "causal")


def window_sides(kernel_size, padding):
    """`(before, after)`: the window of the query at `t` is
    `t - before ... t + after`."""
    if padding == "causal":
        return kernel_size - 1, 0
    return (kernel_size - 1) // 2, kernel_size // 2


def kernel_taps(query_start, query_length, key_length, kernel_size, padding):
    """`(taps, inside)`, both `(T, S)`: the kernel tap of each key (int32,
    clipped to `0 ... K - 1`) and whether the key is in the window."""
    before, _ = window_sides(kernel_size, padding)
    rows = ops.arange(0, query_length, dtype="int32") + ops.cast(
        query_start, "int32")
    taps = (ops.arange(0, key_length, dtype="int32")[None, :]
            - rows[:, None] + before)
    inside = ops.logical_and(ops.greater_equal(taps, 0),
                             ops.less(taps, kernel_size))
    return ops.clip(taps, 0, kernel_size - 1), inside


class ConvolutionSynthesizer(Synthesizer):
    """Base class of `light_conv` and `dynamic_conv` (not registered).

    Options:
        kernel_size: `K`, the number of keys each query sees, a positive
            integer. Defaults to 3.
        padding: `"centered"` (keys `t - (K - 1) // 2 ... t + K // 2`) or
            `"causal"` (keys `t - K + 1 ... t`). Defaults to `"centered"`.
    """

    needs_max_length = False
    defaults = {"kernel_size": 3, "padding": "centered"}

    @classmethod
    def resolve_options(cls, options, max_length):
        resolved = super().resolve_options(options, max_length)
        kernel_size, padding = resolved["kernel_size"], resolved["padding"]
        if not is_int(kernel_size) or kernel_size <= 0:
            raise ValueError(
                "Received an invalid value for option `kernel_size` of "
                f"{cls.variant!r}, expected a positive integer. Received: "
                f"kernel_size={kernel_size!r}"
            )
        if padding not in PADDINGS:
            raise ValueError(
                "Received an invalid value for option `padding` of "
                f"{cls.variant!r}, expected one of {PADDINGS}. Received: "
                f"padding={padding!r}"
            )
        return resolved

    @property
    def kernel_size(self):
        return self.options["kernel_size"]

    @property
    def padding(self):
        return self.options["padding"]

    def taps(self, query_start, query_length, key_length):
        """`kernel_taps` of this variant's options."""
        return kernel_taps(query_start, query_length, key_length,
                           self.kernel_size, self.padding)

    def window(self, query_start, query_length, key_length):
        return self.taps(query_start, query_length, key_length)[1]

    def tap_logits(self, query, query_start, query_length):
        """The logits of the taps of each query's window: `(H, K)` shared
        by every query, or `(B, T, H, K)`, in the logits dtype. `logits`
        places them in the `T x S` matrix; the layer's windowed path
        (`attention.windowed`) uses them as they are."""
        raise NotImplementedError
