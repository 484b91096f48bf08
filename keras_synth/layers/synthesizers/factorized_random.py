"""Factorized random: `L_h = (R1_h R2_h^T)[:T, :S]`, `R1, R2` of rank `r`."""

from keras import ops

from keras_synth.layers.keras_utils import is_int
from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.random import random_initializer
from keras_synth.layers.synthesizers.registry import register_synthesizer


@register_synthesizer("factorized_random")
class FactorizedRandomSynthesizer(Synthesizer):
    """Factorized random: `L_h = (R1_h R2_h^T)[:T, :S]`, `R1, R2` of rank `r`.

    Weights: `left (H, ℓ, r)`, `right (H, ℓ, r)` (not regularized).
    `enable_lora(rank)` freezes both and adds `A (H, ℓ, rank)`,
    `B (H, rank, ℓ)`: `L_h = (R1_h R2_h^T + (alpha / rank) A_h B_h)[:T, :S]`
    (the update has a rank of its own; it is saved as its adapters).
    `quantize("int8")` stores both factors as int8, one scale per row.

    Options:
        rank: `r`, a positive integer. Defaults to 8.
        initializer: initializer of both factors. Defaults to
            `RandomNormal(stddev=1.0)`.
    """

    applies_scale = True
    batch_dependent = False
    bilinear = True
    defaults = {"rank": 8, "initializer": None}
    lora_weights = ("left", "right")
    quantized_weights = ("left", "right")
    stored_weights = ("left", "right")

    @classmethod
    def resolve_options(cls, options, max_length):
        resolved = super().resolve_options(options, max_length)
        rank = resolved["rank"]
        if not is_int(rank) or rank <= 0:
            raise ValueError(
                "Received an invalid value for option `rank` of "
                "'factorized_random', expected a positive integer. "
                f"Received: rank={rank!r}"
            )
        resolved["initializer"] = random_initializer(resolved["initializer"])
        return resolved

    def build(self, query_shape, key_shape):
        shape = (self.num_heads, self.max_length, self.options["rank"])
        initializer = self.options["initializer"]
        self.add_quantizable_weight("left", "left", shape, initializer)
        self.add_quantizable_weight("right", "right", shape, initializer)

    def lora_shape(self):
        return (self.num_heads, self.max_length, self.max_length)

    def zero_logits(self):
        """`R2 = 0` (`R1` keeps its gradient non-zero)."""
        self.assign_zeros(self.right)

    def factors(self, query, key, query_start, query_length, key_length,
                scale=None):
        heads, rank = self.num_heads, self.options["rank"]
        left = self.weight_block(
            "left", (0, query_start, 0), (heads, query_length, rank))
        right = ops.transpose(self.weight_block(
            "right", (0, 0, 0), (heads, key_length, rank)), (0, 2, 1))
        if self.lora_enabled:
            # `[R1, s A] [R2^T; B]`: one product of rank `r + lora_rank`.
            lora_left, lora_right = self.lora_factors(
                query_start, query_length, key_length)
            left = ops.concatenate([left, lora_left], axis=-1)
            right = ops.concatenate([right, lora_right], axis=1)
        return scaled(left, scale, 0), right

    def flops(self, batch_size, query_length, key_length, input_dim):
        """`R1 R2^T`, once for the whole batch."""
        return 2 * self.num_heads * query_length * key_length * (
            self.options["rank"] + (self.lora_rank or 0))
