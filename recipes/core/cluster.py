"""Starting a run of several workers (TensorFlow: `--strategy=multi_worker`
with `TF_CONFIG`) or processes (JAX: `--job_addresses`, `--num_processes`,
`--process_id`, else Keras' `KERAS_DISTRIBUTION_*` variables): their
settings, checked; joining them within `--cluster_timeout` (a watchdog
process ends a longer wait); the chief; and a guard that reports a JAX
process that stopped. JAX's process 0 is the coordinator, at the first of
`--job_addresses`; every process runs the same command with its own
`--process_id`.
"""

import contextlib
import json
import os
import sys

# Seconds a multi-worker process waits for its cluster (`--cluster_timeout`).
DEFAULT_CLUSTER_TIMEOUT = 300.0
# The process flags and the environment variables Keras reads for them.
ENVIRONMENT = {
    "job_addresses": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "num_processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "process_id": "KERAS_DISTRIBUTION_PROCESS_ID",
}
# This process's place once `join_processes` ran: `(process_id,
# num_processes, coordinator address)`; `(0, 1, None)` for one process.
_STATE = {"process": (0, 1, None)}
# The guard process started by `join_processes`, until `release_guard`.
_GUARD_PROCESS = []
RESUME = ("Start every {} again with the same command: the run resumes "
           "from its last backup (<model_dir>/backup).")


def parse_tf_config(text=None):
    """Reads and checks `TF_CONFIG` (default: the environment's).

    Returns:
        `(cluster, task_type, task_index)`: `cluster` maps a job (`chief`,
        `worker`) to its list of `host:port` addresses; `(None, None,
        None)` when `TF_CONFIG` is unset or empty.

    Raises:
        ValueError: naming `TF_CONFIG`, what is wrong and what was
            expected.
    """
    if text is None:
        text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return None, None, None
    expected = ('Expected JSON like {"cluster": {"worker": ["host0:port0", '
                '"host1:port1"]}, "task": {"type": "worker", "index": 0}}.')

    def fail(problem):
        raise ValueError(f"Environment variable `TF_CONFIG` {problem}. "
                         f"Received: TF_CONFIG={text!r}. {expected}")

    try:
        config = json.loads(text)
    except ValueError as error:
        fail(f"is not valid JSON ({error})")
    if not isinstance(config, dict):
        fail("is not a JSON object")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        fail('has no "cluster" object')
    for job, addresses in cluster.items():
        if job not in ("chief", "worker", "evaluator", "ps"):
            fail(f'names an unknown job {job!r} in "cluster" (expected '
                 '"chief" and "worker")')
        if not isinstance(addresses, list) or not _addresses(addresses):
            fail(f'lists the {job!r} addresses as {addresses!r}, not as a '
                 'non-empty list of "host:port" strings')
    if not isinstance(task, dict):
        fail('has no "task" object')
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster:
        fail(f'has "task" type {kind!r}, which is not a job of "cluster" '
             f"({sorted(cluster)})")
    if (not isinstance(index, int) or isinstance(index, bool)
            or not 0 <= index < len(cluster[kind])):
        fail(f'has "task" index {index!r}; the {kind!r} job has '
             f"{len(cluster[kind])} address(es), so it must be an integer "
             f"in [0, {len(cluster[kind])})")
    return cluster, kind, index


def _addresses(addresses):
    """Whether `addresses` is a non-empty list of `host:port` strings."""
    return addresses and all(
        isinstance(a, str) and a.rpartition(":")[0]
        and a.rpartition(":")[2].isdigit() for a in addresses)


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
        values[key], names[key] = getattr(args, key, None), f"--{key}"
        if values[key] is None and environ.get(variable, "").strip():
            values[key], names[key] = environ[variable].strip(), variable

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
    addresses, count, index = values.values()
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
    if not _addresses(listed):
        fail("job_addresses", "host:port addresses, comma-separated")
    if len(listed) > 1 and len(listed) != count:
        fail("job_addresses", f"one address, the coordinator's, or "
             f"{count} (one a process, {names['num_processes']}={count})")
    return ",".join(listed), count, index


def process_index():
    """This process's index (0 in a run of one process)."""
    return _STATE["process"][0]


def process_count():
    """The run's number of processes (1 unless `join_processes` joined
    more)."""
    return _STATE["process"][1]


def is_chief():
    """Whether this process writes the run directory: the only process, or
    the `chief` task of `TF_CONFIG`, or worker 0 of a cluster without one,
    or process 0 of several JAX processes."""
    if process_count() > 1:
        return process_index() == 0
    cluster, kind, index = parse_tf_config()
    if cluster is None:
        return True
    return kind == "chief" or (kind == "worker" and index == 0
                               and "chief" not in cluster)


def program():
    """`python -m recipes.<name>` of the running recipe, for messages."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return "python -m " + name.removesuffix(".__main__") if name else "recipes"


# Run by a watchdog process: ends the process `pid` (the recipe) with
# `message` on stderr unless its stdin closes (the recipe's cluster is up,
# or the recipe ended) within `timeout` seconds.
_WATCHDOG = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if not select.select([sys.stdin], [], [], timeout)[0]:
    sys.stderr.write(message + "\\n")
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)
"""


@contextlib.contextmanager
def _within(timeout, message):
    """Ends this process with `prog: error: message` unless the block ends
    within `timeout` seconds (TensorFlow would wait an hour for a missing
    worker). A process, not a thread: while TensorFlow or JAX waits for its
    peers it holds Python's lock, and no thread of this process runs."""
    import subprocess

    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout),
         f"{program()}: error: {message}"], stdin=subprocess.PIPE)
    try:
        yield
    finally:
        watchdog.stdin.close()
        watchdog.wait()


def tf_cluster(timeout):
    """The context in which `MultiWorkerMirroredStrategy` joins the
    cluster of `TF_CONFIG` (checked first), ending the process with a
    clear error if the cluster is not up within `timeout` seconds."""
    if timeout is None or not timeout > 0:
        raise ValueError(
            "Argument `--cluster_timeout` must be a positive number of "
            f"seconds. Received: --cluster_timeout={timeout}")
    cluster = parse_tf_config()[0]
    if cluster is None:
        raise ValueError(
            "Argument `--strategy=multi_worker` needs the environment "
            "variable TF_CONFIG, which names the cluster and this worker, "
            'e.g. TF_CONFIG=\'{"cluster": {"worker": ["host0:port0", '
            '"host1:port1"]}, "task": {"type": "worker", "index": 0}}\' '
            "(index 1 on the other worker).")
    addresses = ", ".join(a for job in cluster.values() for a in job)
    return _within(timeout, (
        f"The cluster of TF_CONFIG ({addresses}) was not up within "
        f"--cluster_timeout={timeout:g} seconds: start every worker (the "
        "same command, each with its own TF_CONFIG task index), check that "
        "the addresses are reachable, or raise --cluster_timeout."))


# Run by the guard process: unless the recipe writes "done" to its stdin
# before it ends, says which process stopped and whether the coordinator
# still listens (JAX ends the other processes when it does not).
_GUARD = """
import socket, sys
index, count, coordinator, program, resume = sys.argv[1:6]
if sys.stdin.read() != "done":
    host, _, port = coordinator.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), 2).close()
        gone = ""
    except OSError:
        gone = (f" The coordinator, process 0 at {coordinator}, is not "
                "listening: it stopped, and JAX ends every other process.")
    sys.stderr.write(f"{program}: error: Process {index} of {count} stopped "
                     f"before the run ended.{gone} {resume}\\n")
"""


def join_processes(settings, timeout, log=print):
    """Joins the run's processes (`keras.distribution.initialize`) before
    JAX runs anything, within `timeout` seconds (`--cluster_timeout`). A
    guard process then reports a stop of this process that Python never
    sees (JAX ends every process when the coordinator stops) unless
    `release_guard` runs first."""
    import atexit
    import subprocess

    import keras

    addresses, count, index = settings
    coordinator = addresses.split(",")[0]
    with _within(timeout, (
            f"Process {index} of {count}: the run's processes (coordinator, "
            f"process 0, at {coordinator}) were not all up within "
            f"--cluster_timeout={timeout:g} seconds: start every process "
            "(the same command, each with its own --process_id), check that "
            "the coordinator's address is reachable, or raise "
            "--cluster_timeout.")):
        keras.distribution.initialize(addresses, count, index)
    _STATE["process"] = (index, count, coordinator)
    _GUARD_PROCESS.append(subprocess.Popen(
        [sys.executable, "-c", _GUARD, str(index), str(count), coordinator,
         program(), RESUME.format("process")], stdin=subprocess.PIPE,
        text=True))
    atexit.register(release_guard)
    log(f"Processes: this is process {index} of {count} (coordinator "
        f"{coordinator}).")


def release_guard():
    """Tells the guard process that this process ends as it should."""
    while _GUARD_PROCESS:
        guard = _GUARD_PROCESS.pop()
        try:
            guard.stdin.write("done")
            guard.stdin.close()
        except OSError:  # pragma: no cover - the guard already ended
            pass
        guard.wait()
