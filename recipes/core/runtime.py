"""Where a recipe runs: the Keras backend (`KERAS_BACKEND`, TensorFlow when
unset), and the entry point (`run_main`) and set-up (`setup`: strategy or
distribution, seed, precision, devices) that every recipe starts with.
"""

import os
import sys

from recipes.core import placement
from recipes.core import processes
from recipes.core import watchdog
from recipes.core.cluster import cluster_failure
from recipes.core.devices import log_devices
from recipes.core.precision import DEFAULT_MATMUL_PRECISION
from recipes.core.precision import configure_precision
from recipes.core.strategies import check_jit_compile


def select_backend():
    """Returns the Keras backend the recipe runs on: `KERAS_BACKEND`, the
    user's choice (TensorFlow when unset, which this sets). Call it before
    importing keras.

    Raises:
        RuntimeError: a backend the recipes do not train on (e.g. numpy).
    """
    backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if "keras" in sys.modules:
        import keras

        backend = keras.backend.backend()
    if backend not in placement.BACKENDS:
        raise RuntimeError(
            f"The recipes train on the {', '.join(placement.BACKENDS)} "
            f"backends, but KERAS_BACKEND={backend!r} is set. "
            "Run with KERAS_BACKEND=tensorflow, jax or torch.")
    return backend


def setup(args, log=print, layout_map=None):
    """Returns the strategy (`placement.select`: `--strategy`, `--tpu`,
    `--cluster_timeout` on TensorFlow; `--distribution` on JAX), created
    first, before the backend runs any op; then seeds Keras (`--seed`) and
    sets the dtype policy (`--mixed_precision`), logging both. Call it
    before reading data or learning a vocabulary.

    Args:
        layout_map: `(device_mesh) -> keras.distribution.LayoutMap` for
            `--distribution=model_parallel`.
    """
    import keras

    backend = select_backend()
    strategy = placement.select(args, backend, layout_map, log)
    check_jit_compile(getattr(args, "jit_compile", False), args.strategy,
                      strategy.num_replicas_in_sync)
    keras.utils.set_random_seed(args.seed)
    policy = configure_precision(args.mixed_precision)
    log(f"Strategy: {_describe(strategy)} with "
        f"{strategy.num_replicas_in_sync} replica(s); dtype policy {policy}.")
    log_devices(strategy, getattr(args, "matmul_precision",
                                  DEFAULT_MATMUL_PRECISION), log)
    return strategy


def _describe(strategy):
    """The strategy's name for the log: the tf.distribute class, or on
    JAX and PyTorch Keras' own placement or its `keras.distribution`."""
    import keras

    distribution = getattr(strategy, "distribution", False)
    if distribution is False:
        return type(strategy).__name__
    if distribution is None:
        return f"one device ({keras.backend.backend()} backend)"
    return (f"keras.distribution.{type(distribution).__name__} "
            f"({keras.backend.backend()} backend)")


def run_main(parser, run, prog, argv=None, input_paths=(), validate=None):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the arguments are checked: by their
    parser (a bad flag or a value its `type=` refuses prints argparse's
    usage and error and returns 2), then by
    `validate(args, check_options=False)` (the recipe's checks of the
    values, pure Python) and the flags named in `input_paths` (a missing
    file or folder), so that a bad value is reported at once. TensorFlow's
    logs and Python warnings are hidden during the run unless `--tf_logs`
    (or `KERAS_SYNTH_TF_LOGS=1`) is given. A `ValueError` (bad arguments, `DataError`) or `RuntimeError`
    prints one line `prog: error: ...` and returns 2 (set
    `RECIPES_TRACEBACK=1` for the traceback); so does the error of a
    multi-worker run whose peer stopped (it says how to resume).
    """
    from recipes import cli

    try:  # a flag's own check (`type=`, `choices`) prints usage and exits
        args = parser.parse_args(argv)
    except SystemExit as exit:
        return exit.code
    try:
        if validate is not None:
            validate(args, check_options=False)
        cli.check_input_paths(args, input_paths)
        backend = select_backend()
        placement.check_placement(args, backend)
        with cli.quiet_tensorflow(not cli.tf_logs_wanted(args)):
            run(args)
    except Exception as error:
        message = processes.process_failure(error) or (
            str(error) if isinstance(error, (ValueError, RuntimeError))
            else cluster_failure(error))
        if message is None or os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        if processes.process_count() > 1:
            processes.stop_now(2)  # not JAX's wait for the stopped peer
        return 2
    watchdog.release_guard()
    return 0
