"""A recipe's run from its command line to its exit status: the Keras
backend (`KERAS_BACKEND`, TensorFlow when unset), the check of the flags
against it, the entry point (`run_main`), the set-up every recipe starts
with (`setup`: strategy or distribution, seed, precision, devices) and the
one-line message of a run whose peer process or worker stopped.
"""

import os
import sys

from recipes.core import cluster
from recipes.core import compute
from recipes.core import devices


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
    if backend not in compute.BACKENDS:
        raise RuntimeError(
            f"The recipes train on the {', '.join(compute.BACKENDS)} "
            f"backends, but KERAS_BACKEND={backend!r} is set. Run with "
            "KERAS_BACKEND=tensorflow, jax or torch.")
    return backend


def check_placement(args, backend):
    """Refuses flags of another backend's distribution engine: `--strategy`
    other than `one_device` and `--tpu` are tf.distribute's (TensorFlow),
    `--distribution`, `--model_parallel` and several processes are
    `keras.distribution`'s (JAX). Pure Python: `run_main` checks it before
    Keras is imported.

    Raises:
        ValueError: naming the flag, the backend it needs and this one.
    """
    strategy = getattr(args, "strategy", "one_device")
    tpu = getattr(args, "tpu", None)
    distribution = getattr(args, "distribution", None)
    model_parallel = getattr(args, "model_parallel", None)
    on_tensorflow = backend == "tensorflow"

    def refuse(flag, what, needs, hint):
        raise ValueError(
            f"Argument `{flag}` {what}, but KERAS_BACKEND={backend!r}. Run "
            f"it with KERAS_BACKEND={needs}, or on {backend} use {hint}.")

    if not on_tensorflow and (strategy != "one_device" or tpu):
        refuse(f"--strategy={strategy}" if strategy != "one_device"
               else f"--tpu={tpu}",
               "is a tf.distribute strategy of the TensorFlow backend",
               "tensorflow", "--distribution=data_parallel or "
               "model_parallel (keras.distribution)" if backend == "jax"
               else "one device (no --strategy)")
    if backend != "jax" and (distribution or model_parallel is not None):
        refuse(f"--distribution={distribution}" if distribution
               else f"--model_parallel={model_parallel}",
               "is keras.distribution on the JAX backend", "jax",
               "--strategy=mirrored, multi_worker or tpu (tf.distribute)"
               if on_tensorflow else "one device")
    if cluster.process_settings(args) is not None and backend != "jax":
        refuse(next((f"--{key}" for key in cluster.ENVIRONMENT
                     if getattr(args, key, None) is not None),
                    "KERAS_DISTRIBUTION_*"),
               "sets several JAX processes (keras.distribution.initialize)",
               "jax", "--strategy=multi_worker with TF_CONFIG (tf.distribute)"
               if on_tensorflow else "one process")
    if model_parallel is not None and distribution != "model_parallel":
        raise ValueError(
            "Argument `--model_parallel` needs "
            "`--distribution=model_parallel`. Received: "
            f"--distribution={distribution}, "
            f"--model_parallel={model_parallel}")


def setup(args, log=print, layout_map=None):
    """Returns the strategy (`compute.select`, the flags checked first),
    created before the backend runs any op; then seeds Keras (`--seed`),
    sets the dtype policy (`--mixed_precision`) and the matmul precision,
    logging them and the devices. Call it before reading data or learning a
    vocabulary. `layout_map`: `(device_mesh) -> LayoutMap` for
    `--distribution=model_parallel`.
    """
    import keras

    backend = select_backend()
    check_placement(args, backend)
    strategy = compute.select(args, backend, layout_map, log)
    compute.check_jit_compile(getattr(args, "jit_compile", False),
                              args.strategy, strategy.num_replicas_in_sync)
    keras.utils.set_random_seed(args.seed)
    policy = devices.configure_precision(args.mixed_precision)
    distribution = getattr(strategy, "distribution", False)
    name = (type(strategy).__name__ if distribution is False
            else f"one device ({keras.backend.backend()} backend)"
            if distribution is None
            else f"keras.distribution.{type(distribution).__name__} "
            f"({keras.backend.backend()} backend)")
    log(f"Strategy: {name} with {strategy.num_replicas_in_sync} "
        f"replica(s); dtype policy {policy}.")
    devices.log_devices(strategy, getattr(
        args, "matmul_precision", devices.DEFAULT_MATMUL_PRECISION), log)
    return strategy


def run_main(parser, run, prog, argv=None, input_paths=(), validate=None):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the arguments are checked: by their
    parser (a bad flag or a value its `type=` refuses prints argparse's
    usage and error and returns 2), then by
    `validate(args, check_options=False)` (the recipe's checks of the
    values, pure Python), the flags named in `input_paths` (a missing file
    or folder) and `check_placement`, so that a bad value is reported at
    once. TensorFlow's logs and Python warnings are hidden during the run
    unless `--tf_logs` (or `KERAS_SYNTH_TF_LOGS=1`) is given. A
    `ValueError` (bad arguments, `DataError`) or `RuntimeError` prints one
    line `prog: error: ...` and returns 2 (set `RECIPES_TRACEBACK=1` for
    the traceback); so does the error of a multi-worker or multi-process
    run whose peer stopped (`stopped_peer`: it says how to resume).
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
        check_placement(args, select_backend())
        with cli.quiet_tensorflow(not cli.tf_logs_wanted(args)):
            run(args)
    except Exception as error:
        message = stopped_peer(error) or (
            str(error) if isinstance(error, (ValueError, RuntimeError))
            else None)
        if message is None or os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        if cluster.process_count() > 1:
            stop_now(2)  # not JAX's wait for the stopped peer
        return 2
    cluster.release_guard()
    return 0


def stopped_peer(error):
    """What to tell the user when `error` is JAX's report of a peer process
    that stopped (a collective that lost its connection) or TensorFlow's of
    a worker that stopped in a multi-worker run, else None."""
    import re

    index, count = cluster.process_index(), cluster.process_count()
    if count > 1:
        text = str(error)
        if not any(sign in text for sign in (
                "Gloo", "Connection reset", "Connection closed",
                "UNAVAILABLE", "heartbeat", "coordination service")):
            return None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        # XLA repeats its prefix once per nested computation.
        cause = re.sub(r"(Error dispatching computation: )+", "",
                       lines[0] if lines else type(error).__name__)
        others = [i for i in range(count) if i != index]
        who = (f"process {others[0]}" if len(others) == 1
               else "another process (one of " + ", ".join(map(str, others))
               + ")")
        return (f"Process {index} of {count}: {who} of the run stopped "
                f"({cause}). " + cluster.RESUME.format("process"))
    if "tensorflow" not in sys.modules:
        return None
    import tensorflow as tf

    if not isinstance(error, (tf.errors.UnavailableError,
                              tf.errors.CancelledError,
                              tf.errors.AbortedError,
                              tf.errors.DeadlineExceededError)) or (
            cluster.parse_tf_config()[0] is None):
        return None
    # Without TensorFlow's node names (`{{function_node ...}}`).
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # TensorFlow's first lines name the graph node; say who stopped.
    cause = next((line for line in lines if "unhealthy" in line
                  or "Error reported from" in line or "aborted" in line),
                 lines[0] if lines else type(error).__name__)
    return (f"A worker of the cluster stopped ({cause}). "
            + cluster.RESUME.format("worker"))


def stop_now(status):
    """Ends this process with `status` at once: JAX's shutdown would wait
    for the stopped peer (its heartbeat timeout, 100 s), then abort."""
    sys.stdout.flush()
    sys.stderr.flush()
    cluster.release_guard()
    os._exit(status)
