"""int8 quantization of the synthesized logits' weights.

`keras.Model.quantize("int8")` calls `quantize` on every layer without
sublayers: here the random, fixed random and factorized random
synthesizers, whose `(H, ℓ, ℓ)` logits (or `(H, ℓ, r)` factors) are the
bulk of a long-context model's weights. Each quantized weight becomes an
int8 weight of the same name and shape and a float `<name>_scale` of one
scale per row (per head and position: `(H, ℓ)`), Keras's convention
`q = round(w * scale)`, `scale = 127 / max |w_row|`. The logits
dequantize only the `T x S` block they read (`weight_block`).

Layers with sublayers (the dense synthesizers, vanilla) are not visited
by `Model.quantize`: their `EinsumDense` projections are quantized by
Keras; the dense synthesizer's `(H, k, ℓ)` output kernel stays float.
"""

import keras
import numpy as np
from keras import ops

from keras_synth.layers.keras_utils import slice_rows

QUANTIZATION_MODES = ("int8",)


def quantize_rows(value):
    """`value (..., n)` as int8 and one scale per row over the last axis,
    `(q, scale)` NumPy arrays with `value ≈ q / scale[..., None]`."""
    value = np.asarray(ops.convert_to_numpy(value), dtype="float32")
    scale = 127.0 / (np.max(np.abs(value), axis=-1) + keras.config.epsilon())
    quantized = np.clip(np.round(value * scale[..., None]), -127, 127)
    return quantized.astype("int8"), scale.astype("float32")


class SynthesizerQuantization:
    """The int8 part of `Synthesizer` (mixed into it).

    A variant sets `quantized_weights` (attribute names), creates them with
    `add_quantizable_weight` and reads them with `weight_block`.
    """

    quantized_weights = ()

    def add_quantizable_weight(self, attribute, name, shape, initializer,
                               trainable=True):
        """Sets `self.<attribute>` to a logit weight (not regularized); int8
        with a `self.<attribute>_scale` when the layer's dtype policy is
        int8 (a quantized model being loaded)."""
        if self.quantization_mode == "int8":
            self.add_int8_weight(attribute, name, shape)
            return
        setattr(self, attribute, self.add_logit_weight(
            name, shape, initializer, trainable=trainable,
            regularized=False))

    def add_int8_weight(self, attribute, name, shape):
        setattr(self, attribute, self.add_weight(
            name=name, shape=shape, initializer="zeros", dtype="int8",
            trainable=False, autocast=False))
        setattr(self, f"{attribute}_scale", self.add_weight(
            name=f"{name}_scale", shape=shape[:-1], initializer="ones",
            dtype="float32", trainable=False, autocast=False))
        self._is_quantized = True

    def is_quantized_weight(self, attribute):
        return hasattr(self, f"{attribute}_scale")

    def weight_block(self, attribute, start, size):
        """`ops.slice` of the weight `self.<attribute>`, in `logits_dtype`,
        dequantized when it is int8 (only the block read)."""
        block = slice_rows(getattr(self, attribute).value, start, size)
        if not self.is_quantized_weight(attribute):
            return block
        scale = slice_rows(getattr(self, f"{attribute}_scale").value,
                           start[:-1], size[:-1])
        return ops.divide(ops.cast(block, self.logits_dtype),
                          ops.cast(ops.expand_dims(scale, -1),
                                   self.logits_dtype))

    def float_weight(self, attribute):
        """The whole weight `self.<attribute>` as float (dequantized)."""
        weight = getattr(self, attribute)
        return self.weight_block(attribute, (0,) * len(weight.shape),
                                 tuple(weight.shape))

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantizes the logit weights (`mode="int8"` only); what
        `keras.Model.quantize` calls."""
        if mode not in QUANTIZATION_MODES or not self.quantized_weights:
            raise NotImplementedError(
                f"Synthesizer {self.variant!r} ({type(self).__name__}) "
                f"supports quantization mode 'int8' only"
                + ("" if self.quantized_weights else " (none here)")
                + f"; its weights stay float. Received: mode={mode!r}")
        for attribute in self.quantized_weights:
            weight = getattr(self, attribute)
            name = weight.name
            quantized, scale = quantize_rows(weight.value)
            delattr(self, attribute)
            self.add_int8_weight(attribute, name, tuple(quantized.shape))
            getattr(self, attribute).assign(quantized)
            getattr(self, f"{attribute}_scale").assign(scale)
        if self.dtype_policy.quantization_mode is None:
            self.dtype_policy = keras.dtype_policies.get(
                f"{mode}_from_{self.dtype_policy.name}")
