"""Command-line helpers shared by the recipes: honest `--help`, "did you mean"
suggestions, input files checked before TensorFlow is imported, and quiet
TensorFlow logs for the recipes' entry points.

Pure Python: importing this module imports neither TensorFlow nor Keras.
"""

import argparse
import contextlib
import difflib
import logging
import os
import sys
import tempfile
import warnings


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """`--help` that says what happens.

    - `(required)` after a required flag's help, never `(default: None)`;
    - `(default: X)` after a flag with a real default (a list parsed from
      one comma-separated value as it is typed, `a,b`), once: not when the help text states its default
      itself; none when the default is None (the help text then says what
      happens without the flag);
    - no default after on/off switches (`--jit_compile`, `--no_export`):
      their help says what they turn on or off.
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if action.required:
            return text + " (required)"
        if action.option_strings and action.nargs != 0 and (
                action.default is not None
                and action.default is not argparse.SUPPRESS
                and "%(default)" not in text
                and "default" not in text.lower()):
            # A list parsed from one comma-separated value reads as it is
            # typed: a,b (not ['a', 'b']).
            default = ("%(default)s" if action.nargs is not None
                       or not isinstance(action.default, (list, tuple))
                       else ",".join(map(str, action.default)).replace(
                           "%", "%%"))
            return text + f" (default: {default})"
        return text


# What a user who types the key most likely wants, where the closest
# spelling misleads (`--strategy=gpu` is not `tpu`).
MEANT = {
    "gpu": "mirrored", "gpus": "mirrored", "multi_gpu": "mirrored",
    "multigpu": "mirrored", "cuda": "mirrored", "cpu": "one_device",
    "single": "one_device", "default": "one_device",
    "multiworker": "multi_worker", "multi-worker": "multi_worker",
}
# Environment variable: show TensorFlow's logs, as `--tf_logs` does (also
# for `python -m recipes.benchmark`, which has no such flag).
TF_LOGS_ENV = "KERAS_SYNTH_TF_LOGS"


def suggestion(value, choices):
    """`" Did you mean 'x'?"` for what `value` most likely means among
    `choices` (`MEANT`, else the closest spelling), or `""`."""
    meant = MEANT.get(str(value).lower())
    if meant in [str(c) for c in choices]:
        return f" Did you mean {meant!r}?"
    matches = difflib.get_close_matches(str(value), [str(c) for c in choices],
                                        n=1, cutoff=0.6)
    return f" Did you mean {matches[0]!r}?" if matches else ""


def tf_logs_wanted(args=None):
    """Whether TensorFlow's logs are to be shown: `--tf_logs`, or the
    environment variable `KERAS_SYNTH_TF_LOGS` set to anything but `0` or
    empty."""
    return bool(getattr(args, "tf_logs", False)) or os.environ.get(
        TF_LOGS_ENV, "").strip() not in ("", "0")


class ArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors for a value outside
    `choices` end with a "did you mean" suggestion, and whose `type=`
    checks that say so (`names_the_flag`, e.g.
    `recipes.core.flags.positive_int`) name the flag and the value:
    "Argument `--batch_size` must be positive. Received: --batch_size=0"."""

    def _get_value(self, action, arg_string):
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as error:
            if not getattr(action.type, "names_the_flag", False):
                raise
            flag = max(action.option_strings, key=len)
            raise argparse.ArgumentError(
                None, f"Argument `{flag}` {error.message}. Received: "
                f"{flag}={arg_string}") from None

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r} (choose from {choices})."
                + suggestion(value, action.choices))


def check_input_paths(args, flags):
    """Raises a ValueError naming the flag for every input path in `flags`
    (names of `args` attributes) that is given but does not exist.

    Called before TensorFlow is imported, so that a typo is reported at
    once; the recipes' own readers check the contents later. A path with a
    scheme (`gs://bucket/glue`, any file system `tf.io.gfile` knows) is
    checked with `tf.io.gfile` (TensorFlow is then imported, quietly unless
    `--tf_logs`); an unknown scheme is an error naming the flag, also for
    `--model_dir` (an output: only its file system is checked).
    """
    from recipes.core import storage

    paths = {flag: getattr(args, flag, None) for flag in flags}
    model_dir = getattr(args, "model_dir", None)
    if (any(path and not storage.is_local(path)
            for path in [model_dir, *paths.values()])
            and "tensorflow" not in sys.modules
            and not tf_logs_wanted(args)):
        import_quietly(("tensorflow",))
    if model_dir:
        storage.check_filesystem(model_dir, "model_dir")
    for flag, path in paths.items():
        if path:
            storage.check_filesystem(path, flag)
        if path and not (os.path.exists(path) if storage.is_local(path)
                         else storage.gfile().exists(path)):
            raise ValueError(
                f"Argument `--{flag}`: no such file or directory: {path!r}. "
                f"Received: --{flag}={path}")


def run_tool(prog, work):
    """Runs `work()` for a small data tool (`python -m recipes.lra
    .make_documents`, ...): 0 when it returns, 2 with one line `PROG:
    error: ...` on stderr for a ValueError or OSError (bad input, a
    missing file), as argparse reports a bad flag."""
    try:
        work()
    except (ValueError, OSError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    return 0


def add_log_flag(parser):
    """Adds `--tf_logs` (show TensorFlow's logs; hidden by default)."""
    parser.add_argument(
        "--tf_logs", action="store_true",
        help="Show TensorFlow's start-up and C++ log lines, absl and Python "
        "warnings. Hidden by default (they are noise on a CPU machine), "
        f"also shown with {TF_LOGS_ENV}=1; --verbose sets the Keras progress "
        "output.")


@contextlib.contextmanager
def quiet_tensorflow(enabled=True):
    """Silences TensorFlow's C++ log, absl and Python warnings inside the
    block (a recipe's run), restoring everything afterwards.

    TensorFlow prints its start-up lines while it is imported, before its
    log level applies: when TensorFlow is not imported yet, it is imported
    here with the process's stderr set aside (and shown if the import
    fails). `TF_CPP_MIN_LOG_LEVEL` set by the user is kept.
    """
    if not enabled:
        yield
        return
    saved_env = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    if saved_env is None:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    loggers = [logging.getLogger(name) for name in ("tensorflow", "absl")]
    levels = [logger.level for logger in loggers]
    try:
        if "tensorflow" not in sys.modules:
            import_quietly(("tensorflow", "keras"))
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        if saved_env is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)


def import_quietly(modules):
    """Imports `modules` with file descriptor 2 (stderr, also for C++)
    redirected to a temporary file; its text is shown if an import fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for module in modules:
                    __import__(module)
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


__all__ = [
    "MEANT", "TF_LOGS_ENV", "ArgumentParser", "HelpFormatter",
    "add_log_flag", "check_input_paths", "import_quietly",
    "quiet_tensorflow", "suggestion", "tf_logs_wanted",
]
