"""Where a recipe runs: the backend it needs, and the entry point
(`run_main`) and set-up (`setup`: strategy, seed, precision, devices)
that every recipe starts with, before TensorFlow is imported.
"""

import os
import sys

from recipes.core.cluster import DEFAULT_CLUSTER_TIMEOUT
from recipes.core.cluster import cluster_failure
from recipes.core.devices import log_devices
from recipes.core.precision import DEFAULT_MATMUL_PRECISION
from recipes.core.precision import configure_precision
from recipes.core.strategies import check_jit_compile
from recipes.core.strategies import select_strategy


def require_tensorflow_backend():
    """Selects the TensorFlow backend, or explains why it can't.

    The recipes use tf.data, tf.distribute and SavedModel. Call this before
    importing keras: it sets `KERAS_BACKEND=tensorflow` when unset.

    Raises:
        RuntimeError: another backend is forced.
    """
    backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if "keras" in sys.modules:
        import keras

        backend = keras.backend.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            "The recipes run on the TensorFlow backend (tf.data, "
            "tf.distribute, SavedModel), but KERAS_BACKEND="
            f"{backend!r} is set. Unset it or run with "
            "KERAS_BACKEND=tensorflow."
        )


def setup(args, log=print):
    """Returns the strategy (`--strategy`, `--tpu`, `--cluster_timeout`),
    created first, before TensorFlow runs any op; then seeds Keras
    (`--seed`) and sets the dtype policy (`--mixed_precision`), logging
    both. Call it before reading data or learning a vocabulary."""
    import keras

    strategy = select_strategy(args.strategy, args.tpu,
                               getattr(args, "cluster_timeout",
                                       DEFAULT_CLUSTER_TIMEOUT))
    check_jit_compile(getattr(args, "jit_compile", False), args.strategy,
                      strategy.num_replicas_in_sync)
    keras.utils.set_random_seed(args.seed)
    policy = configure_precision(args.mixed_precision)
    log(f"Strategy: {type(strategy).__name__} with "
        f"{strategy.num_replicas_in_sync} replica(s); dtype policy {policy}.")
    log_devices(strategy, getattr(args, "matmul_precision",
                                  DEFAULT_MATMUL_PRECISION), log)
    return strategy


def run_main(parser, run, prog, argv=None, input_paths=(), validate=None):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the arguments are checked:
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

    args = parser.parse_args(argv)
    try:
        if validate is not None:
            validate(args, check_options=False)
        cli.check_input_paths(args, input_paths)
        require_tensorflow_backend()
        with cli.quiet_tensorflow(not cli.tf_logs_wanted(args)):
            run(args)
    except Exception as error:
        message = (str(error) if isinstance(error, (ValueError, RuntimeError))
                   else cluster_failure(error))
        if message is None or os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    return 0
