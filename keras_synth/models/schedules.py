"""Learning-rate schedules of the Synthesizer models' training setups."""

import math
import numbers

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_synth")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's schedule (Vaswani et al., 2017): linear warmup to
    `peak`, then decay with the inverse square root of the step.

    At optimizer step `s` (counted from 0), with `n = s + 1`:
    `peak * min(n / warmup_steps, sqrt(warmup_steps / n))`, i.e. the peak
    is reached at step `warmup_steps - 1` and halved at four times that.
    `.keras` files written by release 0.1.0's translation recipe
    (`recipes.translate>InverseSqrtSchedule`) load as this class.

    Args:
        peak: positive float, the largest learning rate.
        warmup_steps: positive int, the steps of the linear warmup.

    Example:

    >>> schedule = InverseSqrtSchedule(1e-3, warmup_steps=100)
    >>> [round(float(schedule(step)), 6) for step in (49, 99, 399)]
    [0.0005, 0.001, 0.0005]
    >>> optimizer = keras.optimizers.Adam(learning_rate=schedule)
    """

    def __init__(self, peak, warmup_steps):
        if (isinstance(peak, bool) or not isinstance(peak, numbers.Real)
                or not 0 < peak < math.inf):
            raise ValueError(
                "Argument `peak` must be a positive finite number. "
                f"Received: peak={peak!r}"
            )
        if (isinstance(warmup_steps, bool)
                or not isinstance(warmup_steps, numbers.Real)
                or not math.isfinite(warmup_steps)
                or int(warmup_steps) != warmup_steps or warmup_steps < 1):
            raise ValueError(
                "Argument `warmup_steps` must be a positive int. "
                f"Received: warmup_steps={warmup_steps!r}"
            )
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.peak * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}
