"""Several JAX processes in one run (one per host, or per GPU):
`keras.distribution.initialize` from the flags `--job_addresses`,
`--num_processes`, `--process_id` or Keras' environment variables
`KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
`KERAS_DISTRIBUTION_PROCESS_ID`; the chief (process 0); numbers gathered
over the processes; and the message for a process that stopped.

Process 0 is the coordinator: its address (`host:port`, a free port) is
the first of `--job_addresses`. Every process runs the same command with
its own `--process_id`; `keras.distribution.DataParallel` then spans the
devices of every process, and each process reads its share of every
global batch (Keras shards the tf.data pipeline by process).
"""

import contextlib
import os
import sys

from recipes.core import watchdog

# The flags and the environment variables Keras reads for the same values.
ENVIRONMENT = {
    "job_addresses": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "num_processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "process_id": "KERAS_DISTRIBUTION_PROCESS_ID",
}

# This process's place once `initialize` ran: `(process_id, num_processes,
# coordinator address)`; `(0, 1, None)` for a run of one process.
_STATE = {"process": (0, 1, None)}


def add_process_flags(group):
    """Adds `--job_addresses`, `--num_processes` and `--process_id` to an
    argument group."""
    group.add_argument("--job_addresses", default=None, metavar="HOST:PORT",
                       help="JAX backend, several processes (hosts): the "
                       "address of process 0, the coordinator (host:port, "
                       "a free port), or every process's, comma-separated "
                       "(keras.distribution.initialize). Default: "
                       "KERAS_DISTRIBUTION_JOB_ADDRESSES. Every process "
                       "runs the same command with its own --process_id.")
    group.add_argument("--num_processes", type=int, default=None,
                       help="JAX backend: the number of processes of the "
                       "run. Default: KERAS_DISTRIBUTION_NUM_PROCESSES, "
                       "else 1.")
    group.add_argument("--process_id", type=int, default=None,
                       help="JAX backend: this process's index, 0 (the "
                       "coordinator and chief, which writes the run "
                       "directory) to --num_processes - 1. Default: "
                       "KERAS_DISTRIBUTION_PROCESS_ID.")


def process_settings(args, environ=None):
    """`(job_addresses, num_processes, process_id)` of the flags, else of
    the `KERAS_DISTRIBUTION_*` environment; None for a run of one process
    (neither gives a process count above 1 nor any address). Pure Python.

    Raises:
        ValueError: naming the flag (or variable), the value and what was
            expected.
    """
    environ = os.environ if environ is None else environ
    values, names = {}, {}
    for key, variable in ENVIRONMENT.items():
        value = getattr(args, key, None)
        names[key] = f"--{key}"
        if value is None and environ.get(variable, "").strip():
            value, names[key] = environ[variable].strip(), variable
        values[key] = value

    def fail(key, expected):
        name = names[key]
        shown = (f"--{key}={values[key]}" if name.startswith("--")
                 else f"{name}={values[key]!r}")
        raise ValueError(f"Argument `{name}` must be {expected}. "
                         f"Received: {shown}")

    for key in ("num_processes", "process_id"):
        if isinstance(values[key], str):
            try:
                values[key] = int(values[key])
            except ValueError:
                fail(key, "an integer")
    addresses, count, index = (values["job_addresses"],
                               values["num_processes"], values["process_id"])
    if count == 1 and index in (None, 0):
        return None  # one process, whatever the address
    if addresses is None and count is None and index is None:
        return None
    if count is None or count < 1:
        fail("num_processes", "a positive number of processes (with "
             "--job_addresses and --process_id)")
    if index is None or not 0 <= index < count:
        fail("process_id", f"an integer in [0, {count}) (the process count "
             f"{names['num_processes']}={count})")
    if not addresses:
        fail("job_addresses", "host:port of process 0, the coordinator (or "
             "every process's, comma-separated)")
    listed = [a.strip() for a in addresses.split(",")]
    if not all(a.rpartition(":")[0] and a.rpartition(":")[2].isdigit()
               for a in listed):
        fail("job_addresses", "host:port addresses, comma-separated")
    if len(listed) > 1 and len(listed) != count:
        fail("job_addresses", f"one address, the coordinator's, or "
             f"{count} (one a process, {names['num_processes']}={count})")
    return ",".join(listed), count, index


def initialize(settings, timeout, log=print):
    """Joins the run's processes (`keras.distribution.initialize`) before
    JAX runs anything, or ends this process with a clear error if they do
    not all come up within `timeout` seconds (`--cluster_timeout`). A guard
    process then reports a stop of this process that Python never sees
    (JAX ends every process when the coordinator stops)."""
    import keras

    addresses, count, index = settings
    coordinator = addresses.split(",")[0]
    message = (f"{watchdog.program()}: error: Process {index} of {count}: the "
               f"run's processes (coordinator, process 0, at {coordinator}) "
               f"were not all up within --cluster_timeout={timeout:g} "
               "seconds: start every process (the same command, each with "
               "its own --process_id), check that the coordinator's "
               "address is reachable, or raise --cluster_timeout.")
    waiting = watchdog.start_watchdog(timeout, message)
    try:
        keras.distribution.initialize(addresses, count, index)
    finally:
        waiting.stdin.close()
        waiting.wait()
    _STATE["process"] = (index, count, coordinator)
    watchdog.start_guard(index, count, coordinator)
    log(f"Processes: this is process {index} of {count} (coordinator "
        f"{coordinator}).")


def process_index():
    """This process's index (0 in a run of one process)."""
    return _STATE["process"][0]


def process_count():
    """The run's number of processes (1 unless `initialize` joined more)."""
    return _STATE["process"][1]


def gather_numbers(numbers):
    """Every process's list `numbers` (integers below 2**31), in process
    order: `[[...] of process 0, [...] of process 1, ...]` (a collective:
    every process calls it)."""
    if process_count() == 1:
        return [list(numbers)]
    import numpy as np
    from jax.experimental import multihost_utils

    gathered = multihost_utils.process_allgather(
        np.asarray(numbers, np.int32), tiled=False)
    return [[int(x) for x in row] for row in np.asarray(gathered)]


def check_batch_size(batch_size):
    """Refuses a global batch size that the processes cannot share.

    Raises:
        ValueError: naming `--batch_size` and `--num_processes`.
    """
    count = process_count()
    if count > 1 and batch_size % count:
        raise ValueError(
            f"Argument `--batch_size`={batch_size} (the global batch) must "
            f"be a multiple of --num_processes={count}: each process "
            "reads an equal share of every batch.")


def local_batches(dataset):
    """`dataset` (batches of the global batch size) with each batch cut to
    this process's share: rows `[i * b / n, (i + 1) * b / n)` for process
    `i` of `n`, so that the processes together train on the very batches
    of a run of one process (`dataset` itself with one process). A batch
    that the processes cannot share equally stops the run with an error
    (nothing is dropped)."""
    count = process_count()
    if count == 1:
        return dataset
    import tensorflow as tf

    index = process_index()

    def share(tensor):
        rows = tf.shape(tensor)[0]
        tf.debugging.assert_equal(
            rows % count, 0, message=f"A batch's rows cannot be shared "
            f"equally by the {count} processes (--batch_size must be a "
            "multiple of --num_processes).")
        per = rows // count
        return tensor[index * per:(index + 1) * per]

    return dataset.map(
        lambda *batch: tf.nest.map_structure(
            share, batch if len(batch) > 1 else batch[0]),
        num_parallel_calls=tf.data.AUTOTUNE)


@contextlib.contextmanager
def local_model(model):
    """A context that gives `model` in a run of one process; else a copy
    of it on this process's devices with the same weights (gathered over
    the processes: a collective, every process enters it), with Keras'
    distribution unset inside the context.

    Keras' `predict` cannot fetch outputs that span several processes;
    each process predicts, evaluates and exports with the copy instead
    (the evaluation data in full, as a run of one process does)."""
    if process_count() == 1:
        yield model
        return
    import keras
    from jax.experimental import multihost_utils

    weights = [multihost_utils.process_allgather(w.value, tiled=True)
               for w in model.weights]
    with without_distribution():
        copy = keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(model))
        build_config = model.get_build_config()
        if build_config:
            copy.build_from_config(build_config)
        copy.set_weights(weights)
        yield copy


@contextlib.contextmanager
def without_distribution():
    """A context with Keras' distribution unset in a run of several
    processes (a no-op with one): what one process does alone (the
    chief's backup) must not create variables over every process's
    devices, which JAX checks with the other processes."""
    if process_count() == 1:
        yield
        return
    import keras

    distribution = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(distribution)


def process_failure(error):
    """What to tell the user when `error` is JAX's report of a peer
    process that stopped (a collective that lost its connection), else
    None."""
    index, count, coordinator = _STATE["process"]
    if count == 1:
        return None
    text = str(error)
    if not any(sign in text for sign in (
            "Gloo", "Connection reset", "Connection closed", "UNAVAILABLE",
            "heartbeat", "coordination service")):
        return None
    import re

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = lines[0] if lines else type(error).__name__
    # XLA repeats its prefix once per nested computation.
    cause = re.sub(r"(Error dispatching computation: )+", "", cause)
    others = [i for i in range(count) if i != index]
    who = (f"process {others[0]}" if len(others) == 1
           else "another process (one of " + ", ".join(map(str, others))
           + ")")
    return (f"Process {index} of {count}: {who} of the run stopped "
            f"({cause}). Start every process again with the same command: "
            "the run resumes from its last backup (<model_dir>/backup).")


def stop_now(status):
    """Ends this process with `status` at once: JAX's shutdown would wait
    for the stopped peer (its heartbeat timeout, 100 s), then abort."""
    sys.stdout.flush()
    sys.stderr.flush()
    watchdog.release_guard()
    os._exit(status)


__all__ = ["ENVIRONMENT", "add_process_flags", "check_batch_size",
           "gather_numbers", "initialize", "local_batches", "local_model",
           "process_count", "process_failure", "process_index",
           "process_settings", "stop_now",
           "without_distribution"]
