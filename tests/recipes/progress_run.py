"""Runs a module like `python -m` with a line after every training batch.

    python -m tests.recipes.progress_run recipes.glue --model_dir=... ...

prints `batch-end epoch=E batch=B` (both from 1, flushed) after each
training batch of every `keras.Model.fit` the module runs, so that a fault
test can SIGKILL a recipe in the middle of an epoch, after a known number
of its batches.
"""

import runpy
import sys

import keras


class BatchLines(keras.callbacks.Callback):
    """Prints `batch-end epoch=E batch=B` after each training batch."""

    epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        print(f"batch-end epoch={self.epoch} batch={batch + 1}", flush=True)


def main():
    fit = keras.Model.fit

    def fit_with_batch_lines(self, *args, callbacks=None, **kwargs):
        callbacks = [*(callbacks or []), BatchLines()]
        return fit(self, *args, callbacks=callbacks, **kwargs)

    keras.Model.fit = fit_with_batch_lines
    module = sys.argv[1]
    sys.argv = [module] + sys.argv[2:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
