"""`SmoothedSparseCategoricalCrossentropy`: token cross-entropy with label
smoothing, for integer labels."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_synth")
class SmoothedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy from logits and integer labels, with label smoothing.

    `keras.losses.SparseCategoricalCrossentropy` has no label smoothing;
    this loss is `keras.losses.CategoricalCrossentropy(from_logits=True,
    label_smoothing=label_smoothing)` of the one-hot labels, without
    building them: the target puts `1 - label_smoothing` on the label and
    spreads `label_smoothing` uniformly over all `V` classes, so a token's
    loss is `(1 - s) * nll + s * mean_v(-log p_v)`. What the Transformer and
    the Synthesizer paper train translation with (`label_smoothing=0.1`).

    Pass the padding mask as `sample_weight` (keras-hub's seq2seq and causal
    LM preprocessors return it): with the default
    `reduction="mean_with_sample_weight"` the loss is the mean over real
    tokens, padding excluded from the denominator too.

    Args:
        label_smoothing: float in `[0, 1)`. Defaults to 0.1; 0 is the plain
            sparse cross-entropy.
        reduction: a Keras loss reduction. Defaults to
            `"mean_with_sample_weight"`.
        name: the loss name.
        **kwargs: base `keras.losses.Loss` arguments (`dtype`).

    Call arguments:
        y_true: int labels `(batch, ...)`.
        y_pred: logits `(batch, ..., classes)`.
        sample_weight: optional weights `(batch, ...)`.

    Returns:
        The reduced loss (a scalar by default).

    Example:

    >>> import numpy as np
    >>> loss = SmoothedSparseCategoricalCrossentropy(label_smoothing=0.1)
    >>> logits = np.array([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], "float32")
    >>> labels = np.array([[0, 1]])
    >>> weights = np.array([[1.0, 0.0]], "float32")  # the second is padding
    >>> round(float(loss(labels, logits, weights)), 4)
    0.3729
    """

    def __init__(
        self,
        label_smoothing=0.1,
        reduction="mean_with_sample_weight",
        name="smoothed_sparse_categorical_crossentropy",
        **kwargs,
    ):
        if not isinstance(label_smoothing, (int, float)) or not (
            0.0 <= label_smoothing < 1.0
        ):
            raise ValueError(
                "Argument `label_smoothing` must be a float in [0, 1). "
                f"Received: label_smoothing={label_smoothing!r}"
            )
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        labels = ops.expand_dims(ops.cast(y_true, "int32"), -1)
        nll = -ops.squeeze(ops.take_along_axis(log_probs, labels, -1), -1)
        if not self.label_smoothing:
            return nll
        uniform = -ops.mean(log_probs, axis=-1)
        return (1.0 - self.label_smoothing) * nll + (
            self.label_smoothing * uniform
        )

    def get_config(self):
        config = super().get_config()
        config["label_smoothing"] = self.label_smoothing
        return config
