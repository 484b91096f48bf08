"""Runs a module like `python -m` with a line after every training batch.

    python -m tests.recipes.progress_run recipes.glue --model_dir=... ...

prints `batch-end epoch=E batch=B` (both from 1, flushed) after each
training batch of every `keras.Model.fit` the module runs, so that a fault
test can SIGKILL a recipe in the middle of an epoch, after a known number
of its batches.
"""

import contextlib
import io
import runpy
import signal
import sys
import time

import keras


class BatchLines(keras.callbacks.Callback):
    """Prints `batch-end epoch=E batch=B` after each training batch."""

    epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        print(f"batch-end epoch={self.epoch} batch={batch + 1}", flush=True)


def kill_at(process, epoch, batch, timeout=300):
    """SIGKILLs `process` (a recipe under this module, stdout a text pipe)
    once it prints `batch-end epoch=E batch=B`; returns the lines it
    printed. Raises AssertionError (with the output) if the line does not
    come within `timeout` seconds or the process ends otherwise."""
    marker = f"batch-end epoch={epoch} batch={batch}"
    seen, deadline = [], time.time() + timeout
    try:
        for line in process.stdout:
            seen.append(line)
            if line.strip() == marker:
                process.send_signal(signal.SIGKILL)
                break
            assert time.time() < deadline, "".join(seen)[-3000:]
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    return seen


@contextlib.contextmanager
def batch_lines():
    """Every `keras.Model.fit` in the block prints `batch-end` lines
    (`BatchLines`)."""
    fit = keras.Model.fit

    def fit_with_batch_lines(self, *args, callbacks=None, **kwargs):
        callbacks = [*(callbacks or []), BatchLines()]
        return fit(self, *args, callbacks=callbacks, **kwargs)

    keras.Model.fit = fit_with_batch_lines
    try:
        yield
    finally:
        keras.Model.fit = fit


def run_here(module, argv, with_batch_lines=False):
    """Runs `python -m module ARGV` in this process: the module's
    `__main__` as `python -m` runs it, its standard output and error
    captured together (with the `batch-end` lines of `main` if
    `with_batch_lines`). Returns `(exit status, output)`.

    For a recipe run a test only reads, or a resumed run: what a resumed
    run finds is on disk, whatever process reads it. The killed runs stay
    processes (`kill_at`), and a process would add its imports (about
    10 s on 2 CPU cores) to every run.
    """
    out = io.StringIO()
    saved = sys.argv[:]
    sys.argv[:] = [module, *argv]
    lines = batch_lines() if with_batch_lines else contextlib.nullcontext()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(
                out), lines:
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else (
                    0 if exit.code is None else 1)
    finally:
        sys.argv[:] = saved
    return code, out.getvalue()


def main():
    module = sys.argv[1]
    sys.argv = [module] + sys.argv[2:]
    with batch_lines():
        runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
