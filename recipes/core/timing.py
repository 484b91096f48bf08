"""The recipes' clocks, as Keras callbacks that read no tensor: training
steps per second, and a time budget that stops training; and the training
speed in tokens per second that the recipes report.
"""

import time


def make_steps_timer():
    """A callback measuring training steps per second: from an epoch's
    start to its last training step (the clock stops when `fit`'s
    validation starts, before the callbacks' epoch-end work such as
    evaluation).

    It reads no tensor and has no `on_train_batch_end` (no step waits for
    the previous one): the steps of an epoch are counted from the first
    step of its last call of the compiled step (`on_train_batch_begin`)
    plus the model's `steps_per_execution` (which divides the epoch's
    steps, see `flags.steps_per_execution`).
    """
    import keras

    class StepsTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.seconds = 0.0
            self._start = None
            self._stop = None
            self._last_begin = None

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()
            self._stop = None
            self._last_begin = None

        def on_train_batch_begin(self, batch, logs=None):
            self._last_begin = batch

        def on_test_begin(self, logs=None):
            if self._start is not None and self._stop is None:
                self._stop = time.perf_counter()  # fit's validation

        def on_epoch_end(self, epoch, logs=None):
            stop = self._stop if self._stop is not None else (
                time.perf_counter())
            self.seconds += stop - self._start
            self.steps += self.epoch_steps()
            self._start = None
            if logs is not None:
                logs["steps_per_second"] = self.steps_per_second

        def epoch_steps(self):
            """The training steps of the epoch in progress (so far)."""
            if self._last_begin is None:
                return 0
            steps = self._last_begin + int(
                getattr(self.model, "steps_per_execution", 1) or 1)
            total = (self.params or {}).get("steps")
            return min(steps, total) if total else steps

        @property
        def steps_per_second(self):
            return self.steps / self.seconds if self.seconds else 0.0

    return StepsTimer()


def make_time_budget_callback(minutes):
    """A callback that stops training after `minutes` (the epoch in
    progress ends early and is saved); `.stopped` tells whether it did.

    The clock is read when a call of the compiled step starts
    (`on_train_batch_begin`, which reads no tensor): past the budget,
    training stops once that call (`steps_per_execution` steps) is done.
    """
    import keras

    class TimeBudget(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.start = None
            self.stopped = False

        def on_train_begin(self, logs=None):
            self.start = time.time()

        def on_train_batch_begin(self, batch, logs=None):
            if time.time() - self.start > 60.0 * minutes:
                self.model.stop_training = True
                self.stopped = True

    return TimeBudget()


def training_speed(steps_per_second, tokens_per_step, what, note, log,
                   about=False):
    """`results.json`'s `tokens_per_second` (steps/s x `tokens_per_step`;
    None without a measured step) and `tokens_per_second_note` (`note`:
    how it was counted), logged as one line "Training speed: S steps/s,
    T tokens/s (`what`)." (`about`: an estimate, e.g. from mean
    lengths)."""
    tokens_per_second = (steps_per_second * tokens_per_step
                         if steps_per_second else None)
    if tokens_per_second:
        log(f"Training speed: {steps_per_second:.2f} steps/s, "
            f"{'about ' if about else ''}{tokens_per_second:,.0f} tokens/s "
            f"({what}).")
    return {"tokens_per_second": tokens_per_second,
            "tokens_per_second_note": note}


__all__ = ["make_steps_timer", "make_time_budget_callback", "training_speed"]
