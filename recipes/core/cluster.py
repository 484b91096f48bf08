"""A multi-worker cluster from `TF_CONFIG`: the cluster and this task, the
chief, `MultiWorkerMirroredStrategy` (its start bounded in time by a
watchdog process), what the chief prepares for the other workers
(`chief_first`) and the message for a worker that stopped.
"""

import json
import os
import sys

from recipes.core import processes
from recipes.core import watchdog


# Seconds a multi-worker process waits for its cluster (`--cluster_timeout`).
DEFAULT_CLUSTER_TIMEOUT = 300.0


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
        if (not isinstance(addresses, list) or not addresses or not all(
                isinstance(a, str) and a.rpartition(":")[2].isdigit()
                and a.rpartition(":")[0] for a in addresses)):
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


def is_chief():
    """Whether this process writes the run directory: the only process, or
    the `chief` task of `TF_CONFIG`, or worker 0 of a cluster without one,
    or process 0 of several JAX processes (`recipes.core.processes`)."""
    if processes.process_count() > 1:
        return processes.process_index() == 0
    cluster, kind, index = parse_tf_config()
    if cluster is None:
        return True
    return kind == "chief" or (kind == "worker" and index == 0
                               and "chief" not in cluster)


def _start_cluster_watchdog(timeout, cluster):
    """Ends this process with a clear error if the cluster is not up
    within `timeout` seconds (TensorFlow would wait for a missing worker
    for an hour); returns the watchdog process: close its stdin once the
    cluster is up.

    A process, not a thread: while TensorFlow waits for the cluster it
    holds Python's lock, and no thread or signal handler of this process
    runs."""

    addresses = ", ".join(a for job in cluster.values() for a in job)
    message = (f"{watchdog.program()}: error: The cluster of TF_CONFIG "
               f"({addresses}) was not up within --cluster_timeout="
               f"{timeout:g} seconds: start every worker (the same command, "
               "each with its own TF_CONFIG task index), check that the "
               "addresses are reachable, or raise --cluster_timeout.")
    return watchdog.start_watchdog(timeout, message)


def multi_worker_strategy(cluster_timeout):
    import tensorflow as tf

    class MultiWorkerMirroredStrategy(
            tf.distribute.MultiWorkerMirroredStrategy):
        """`tf.distribute.MultiWorkerMirroredStrategy` whose `reduce` takes
        the nested values and scalars Keras 3's `fit` gives it.

        Keras' TensorFlow trainer reduces a batch `(x, y)` in one call and
        each scalar metric with `axis=0`; TensorFlow's multi-worker
        `reduce` takes neither (one tensor, and an axis the value has).
        Here each tensor of the structure is reduced, a scalar with
        `axis=None` (the mean or sum over replicas that was meant).
        """

        def reduce(self, reduce_op, value, axis):
            def reduce_one(v):
                local = v.values[0] if isinstance(
                    v, tf.distribute.DistributedValues) else v
                rank = getattr(getattr(local, "shape", None), "rank", None)
                return super(MultiWorkerMirroredStrategy, self).reduce(
                    reduce_op, v, None if rank == 0 else axis)

            return tf.nest.map_structure(reduce_one, value)

    if cluster_timeout is None or not cluster_timeout > 0:
        raise ValueError(
            "Argument `--cluster_timeout` must be a positive number of "
            f"seconds. Received: --cluster_timeout={cluster_timeout}")
    cluster, _, _ = parse_tf_config()
    if cluster is None:
        raise ValueError(
            "Argument `--strategy=multi_worker` needs the environment "
            "variable TF_CONFIG, which names the cluster and this worker, "
            'e.g. TF_CONFIG=\'{"cluster": {"worker": ["host0:port0", '
            '"host1:port1"]}, "task": {"type": "worker", "index": 0}}\' '
            "(index 1 on the other worker).")
    guard = _start_cluster_watchdog(cluster_timeout, cluster)
    try:
        return MultiWorkerMirroredStrategy()
    finally:
        guard.stdin.close()
        guard.wait()


def chief_first(strategy, prepare, fingerprint=repr):
    """Calls `prepare()` on the chief first, then on the other workers,
    and returns its result, the same on every worker.

    The chief prepares what the run shares (e.g. learns and saves the
    vocabulary, repairs the run directory); the other workers wait for it
    (a collective barrier: a chief that fails ends their wait too), then
    call `prepare()`, which reads what the chief saved. Their result must
    equal the chief's, compared by a checksum of `fingerprint(result)` (a
    string), else a ValueError says so (e.g. a `--model_dir` the workers
    do not share, or workers started with different arguments). Without a
    multi-worker strategy this is `prepare()`.
    """
    import zlib

    several_processes = processes.process_count() > 1
    if not several_processes and not _is_multi_worker(strategy):
        return prepare()

    def checksum(result):
        # Below 2**31: JAX gathers int32.
        return zlib.crc32(fingerprint(result).encode("utf-8")) >> 1

    chief = is_chief()
    result = prepare() if chief else None
    if several_processes:  # JAX: the chief's checksum, from process 0
        chiefs = processes.gather_numbers(
            [checksum(result), 1] if chief else [0, 0])[0]
    else:
        chiefs = _sum_over_workers(
            strategy, [checksum(result), 1] if chief else [0, 0])
    if not chief:
        result = prepare()
        if chiefs[1] != 1 or checksum(result) != chiefs[0]:
            raise ValueError(
                "This worker's run set-up differs from the chief's (the "
                "vocabulary, the epoch to resume from or the arguments): "
                "start every worker with the same arguments, and give "
                "them a --model_dir they all see (a shared file system).")
    return result


def _is_multi_worker(strategy):
    if not hasattr(strategy, "extended"):  # not tf.distribute (JAX, torch)
        return False
    import tensorflow as tf

    cluster, _, _ = parse_tf_config()
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and cluster is not None
            and sum(len(a) for j, a in cluster.items()
                    if j in ("chief", "worker")) > 1)


def _sum_over_workers(strategy, numbers):
    """Sums the lists `numbers` (non-negative integers below 2**52) over
    every worker of `strategy` (a collective: every worker calls it)."""
    import tensorflow as tf

    local = tf.constant(numbers, tf.float64)

    @tf.function
    def total():
        per_replica = strategy.run(lambda: tf.identity(local))
        return strategy.reduce("SUM", per_replica, axis=None)

    replicas_per_worker = len(strategy.extended.worker_devices)
    return [int(round(x / replicas_per_worker)) for x in total().numpy()]


def cluster_failure(error):
    """What to tell the user when `error` is TensorFlow's report of a
    worker that stopped in a multi-worker run, else None."""
    if "tensorflow" not in sys.modules or parse_tf_config()[0] is None:
        return None
    import tensorflow as tf

    if not isinstance(error, (tf.errors.UnavailableError,
                              tf.errors.CancelledError,
                              tf.errors.AbortedError,
                              tf.errors.DeadlineExceededError)):
        return None
    import re

    # Without TensorFlow's node names (`{{function_node ...}}`).
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # TensorFlow's first lines name the graph node; say who stopped.
    cause = next((line for line in lines if "unhealthy" in line
                  or "Error reported from" in line or "aborted" in line),
                 lines[0] if lines else type(error).__name__)
    return (f"A worker of the cluster stopped ({cause}). Start every worker "
            "again with the same command: the run resumes from its last "
            "backup (<model_dir>/backup).")
