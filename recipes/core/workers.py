"""What the workers (TensorFlow, `TF_CONFIG`) or processes (JAX) of one
run do together, once joined (`recipes.core.cluster`): the chief's set-up
that the others check (`chief_first`), each process's share of a batch,
and its local model for evaluation. Each is a no-op in a run of one
process.
"""

import contextlib

from recipes.core import cluster


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

    several_processes = cluster.process_count() > 1
    if not several_processes and not _is_multi_worker(strategy):
        return prepare()

    def checksum(result):
        # Below 2**31: JAX gathers int32.
        return zlib.crc32(fingerprint(result).encode("utf-8")) >> 1

    chief = cluster.is_chief()
    result = prepare() if chief else None
    mine = [checksum(result), 1] if chief else [0, 0]
    if several_processes:  # JAX: the chief's checksum, from process 0
        chiefs = gather_numbers(mine)[0]
    else:
        chiefs = _sum_over_workers(strategy, mine)
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

    jobs, _, _ = cluster.parse_tf_config()
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and jobs is not None
            and sum(len(a) for j, a in jobs.items()
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


def gather_numbers(numbers):
    """Every process's list `numbers` (integers below 2**31), in process
    order: `[[...] of process 0, [...] of process 1, ...]` (a collective:
    every process calls it)."""
    if cluster.process_count() == 1:
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
    count = cluster.process_count()
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
    count = cluster.process_count()
    if count == 1:
        return dataset
    import tensorflow as tf

    index = cluster.process_index()

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
    if cluster.process_count() == 1:
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
    if cluster.process_count() == 1:
        yield
        return
    import keras

    distribution = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(distribution)
