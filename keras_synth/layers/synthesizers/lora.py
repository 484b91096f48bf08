"""LoRA for synthesizers: a trainable low-rank update of a frozen weight.

`Synthesizer.enable_lora(rank)` (what `keras_hub.models.Backbone.enable_lora`
calls on the layers it targets) freezes the variant's adapted weights and
adds `lora_kernel_a (H, m, rank)` and `lora_kernel_b (H, rank, n)`, `B`
zero at start, so that the logits are unchanged until training moves them.
Per head the adapted `m x n` matrix becomes `W + (alpha / rank) A B`:

- `random`: `L = R + (alpha / rank) A B` (`W = R`, `ℓ x ℓ`);
- `factorized_random`: `L = R1 R2^T + (alpha / rank) A B` (the frozen
  factors keep their rank, the update has its own);
- `dense`: the `(k, ℓ)` output kernel `W2 + (alpha / rank) A B`.

The conventions are Keras's `Dense.enable_lora`: `lora_enabled`,
`lora_rank`, `lora_alpha` (defaults to the rank), `a_initializer`
("he_uniform"), `b_initializer` ("zeros"), the adapters as `lora_kernel_a`
and `lora_kernel_b` (which `Backbone.save_lora_weights` writes). They are
kept in the logits' dtype (float32 under mixed precision).
"""

import keras
from keras import ops

from keras_synth.layers.keras_utils import is_int


class SynthesizerLora:
    """The LoRA part of `Synthesizer` (mixed into it).

    A variant that supports LoRA sets `lora_weights` (the attribute names of
    the weights that LoRA freezes) and implements `lora_shape()`; it adds
    `lora_delta(...)` to its logits where `lora_enabled`.
    """

    # Attribute names of the weights LoRA freezes; empty: no LoRA.
    lora_weights = ()
    # Whether the update merges into `lora_weights[0]` when saved (its
    # shape is `lora_shape()`); else the adapters are saved as they are.
    lora_mergeable = False

    lora_enabled = False
    lora_rank = None
    lora_alpha = None

    @classmethod
    def lora_layer_names(cls):
        """The names of this variant's layers that `Backbone.enable_lora`
        targets by default: the synthesizer itself where it has LoRA of its
        own (`lora_weights`); variants with projections add theirs."""
        return (cls.variant,) if cls.lora_weights else ()

    def lora_shape(self):
        """`(H, m, n)`: the shape of the matrix that `A B` updates."""
        raise NotImplementedError

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform",
                    b_initializer="zeros"):
        """Freezes the adapted weights and adds the rank-`rank` update.

        Args:
            rank: positive int, the rank of the update.
            lora_alpha: the update is scaled by `lora_alpha / rank`.
                Defaults to `rank`.
            a_initializer: initializer of `lora_kernel_a`.
            b_initializer: initializer of `lora_kernel_b` (zeros: the
                outputs are unchanged right after `enable_lora`).
        """
        if not self.lora_weights:
            raise NotImplementedError(
                f"Synthesizer {self.variant!r} ({type(self).__name__}) does "
                "not support LoRA: `enable_lora` is defined for 'random', "
                "'factorized_random' and 'dense'.")
        if not is_int(rank) or rank <= 0:
            raise ValueError(
                "Argument `rank` of `enable_lora` must be a positive int. "
                f"Received: rank={rank!r}")
        if not self.built:
            raise ValueError(
                "Cannot enable lora on a layer that isn't yet built. "
                f"Synthesizer {self.variant!r} is not built yet.")
        if self.lora_enabled:
            raise ValueError(
                "lora is already enabled. This can only be done once per "
                f"layer (synthesizer {self.variant!r}, "
                f"lora_rank={self.lora_rank}).")
        if self.sublayer_kwargs.get("kernel_constraint") and (
                self.lora_regularized):
            raise ValueError(
                "Lora is incompatible with kernel constraints. In order to "
                "enable lora on this layer, remove the `kernel_constraint` "
                f"argument (synthesizer {self.variant!r}).")
        heads, rows, columns = self.lora_shape()
        regularizer = (self.sublayer_kwargs.get("kernel_regularizer")
                       if self.lora_regularized else None)
        self._tracker.unlock()
        try:
            self.lora_kernel_a = self.add_weight(
                name="lora_kernel_a", shape=(heads, rows, rank),
                initializer=keras.initializers.get(a_initializer),
                regularizer=regularizer, dtype=self.logits_dtype,
                autocast=False)
            self.lora_kernel_b = self.add_weight(
                name="lora_kernel_b", shape=(heads, rank, columns),
                initializer=keras.initializers.get(b_initializer),
                regularizer=regularizer, dtype=self.logits_dtype,
                autocast=False)
        finally:
            self._tracker.lock()
        for name in self.lora_weights:
            getattr(self, name).trainable = False
        self.lora_enabled = True
        self.lora_rank = rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    # Whether the adapters take the layer's kernel regularizer (as Keras's
    # Dense) and refuse a kernel constraint; the random variants' logits
    # are never regularized or constrained.
    lora_regularized = False

    @property
    def lora_scale(self):
        """`lora_alpha / lora_rank`."""
        return self.lora_alpha / self.lora_rank

    def lora_factors(self, row_start=0, row_count=None, column_count=None):
        """`(scale * A[:, rows], B[:, :, :columns])`, the update's factors
        for `row_count` rows from `row_start` and the first `column_count`
        columns (`None`: all)."""
        heads, rows, columns = self.lora_shape()
        rank = self.lora_rank
        left = ops.slice(
            self.lora_kernel_a.value, (0, row_start, 0),
            (heads, rows if row_count is None else row_count, rank))
        right = ops.slice(
            self.lora_kernel_b.value, (0, 0, 0),
            (heads, rank, columns if column_count is None else column_count))
        return ops.multiply(left, self.lora_scale), right

    def lora_delta(self, row_start=0, row_count=None, column_count=None):
        """The update `(alpha / rank) A B` `(H, rows, columns)`, arguments
        as `lora_factors`'."""
        left, right = self.lora_factors(row_start, row_count, column_count)
        return ops.einsum("nmr,nrk->nmk", left, right)
