"""Random and fixed random: `L_h = R_h[:T, :S]`, `R_h` an `ℓ x ℓ` matrix."""

import keras

from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("random")
class RandomSynthesizer(Synthesizer):
    """Random: `L_h = R_h[:T, :S]` with `R_h` a trainable `ℓ x ℓ` matrix.

    Weight: `logits (H, ℓ, ℓ)` (not regularized or constrained).
    `enable_lora(rank)` freezes `R` and adds `A (H, ℓ, rank)`,
    `B (H, rank, ℓ)`: `L_h = (R_h + (alpha / rank) A_h B_h)[:T, :S]`.
    `quantize("int8")` stores `R` as int8 with one scale per row.

    Options:
        initializer: initializer of `R`. Defaults to
            `RandomNormal(stddev=1.0)`.
    """

    applies_scale = True
    batch_dependent = False
    trainable_logits = True
    defaults = {"initializer": None}
    lora_weights = ("kernel",)
    lora_mergeable = True
    quantized_weights = ("kernel",)
    stored_weights = ("kernel",)

    @classmethod
    def resolve_options(cls, options, max_length):
        resolved = super().resolve_options(options, max_length)
        resolved["initializer"] = random_initializer(resolved["initializer"])
        return resolved

    def build(self, query_shape, key_shape):
        length = self.max_length
        self.add_quantizable_weight(
            "kernel", "logits", (self.num_heads, length, length),
            self.options["initializer"], trainable=self.trainable_logits,
        )

    def lora_shape(self):
        return (self.num_heads, self.max_length, self.max_length)

    def zero_logits(self):
        """`R = 0` (its gradient is the upstream one: non-zero)."""
        self.assign_zeros(self.kernel)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        logits = self.weight_block(
            "kernel", (0, query_start, 0),
            (self.num_heads, query_length, key_length))
        if self.lora_enabled:
            logits = logits + self.lora_delta(
                query_start, query_length, key_length)
        return scaled(logits, scale, 0)


@register_synthesizer("fixed_random")
class FixedRandomSynthesizer(RandomSynthesizer):
    """Fixed random: as random, but `R` is never trained (still saved)."""

    trainable_logits = False

    @classmethod
    def lora_layer_names(cls):
        """None: a fixed `R` is not adapted by default (target the layer
        by its name "fixed_random" to adapt it anyway)."""
        return ()

    def zero_logits(self):
        """Not supported: a fixed `R` set to zero would stay zero."""
        raise NotImplementedError(
            "Synthesizer 'fixed_random' does not support `zero_logits()`: "
            "its matrix is not trained, so zero logits would stay zero. "
            "Use 'random' instead.")


def random_initializer(initializer):
    """`initializer` as a Keras initializer; `None` is the paper's
    `RandomNormal(stddev=1.0)`."""
    if initializer is None:
        return keras.initializers.RandomNormal(stddev=1.0)
    try:
        return keras.initializers.get(initializer)
    except ValueError as error:
        raise ValueError(
            "Received an invalid value for synthesizer option "
            f"`initializer`, expected a Keras initializer. Received: "
            f"initializer={initializer!r} ({error})"
        ) from None
