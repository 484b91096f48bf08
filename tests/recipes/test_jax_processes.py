"""Several JAX processes in one run (`recipes.core.cluster`,
`recipes.core.workers`): the flags
and `KERAS_DISTRIBUTION_*` variables, each process's share of a batch,
and real processes on 127.0.0.1 (gloo collectives on CPU) that train the
built-in GLUE task as one process does, stop clearly when one of them is
killed and resume together.

The flag checks and batch shares run on every backend; the processes
(about two minutes on 2 cores) run in the JAX suite.
"""

import json
import os
import types

import keras
import numpy as np
import pytest

from recipes.core import cluster as cluster_lib
from recipes.core import runtime
from recipes.core import workers
from tests.recipes.cluster import Cluster
from tests.recipes.cluster import free_ports
from tests.recipes.cluster import jax_process_env

GLUE = ["-m", "recipes.glue", "--task=builtin", "--synthesizer=random+vanilla",
        "--max_train_examples=64", "--batch_size=16", "--num_layers=1",
        "--hidden_dim=32", "--num_heads=2", "--max_length=32",
        "--vocab_size=200", "--no_tensorboard", "--verbose=2"]

needs_jax = pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="JAX processes: run in the JAX suite (KERAS_BACKEND=jax)")


def _args(**values):
    defaults = dict(job_addresses=None, num_processes=None, process_id=None)
    defaults.update(values)
    return types.SimpleNamespace(**defaults)


# ----------------------------------------------------------- the settings

def test_one_process_without_flags_or_environment():
    assert cluster_lib.process_settings(_args(), environ={}) is None
    assert cluster_lib.process_settings(
        _args(num_processes=1, process_id=0), environ={}) is None


def test_flags_override_the_environment():
    environ = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234",
               "KERAS_DISTRIBUTION_NUM_PROCESSES": "4",
               "KERAS_DISTRIBUTION_PROCESS_ID": "3"}
    assert cluster_lib.process_settings(_args(), environ) == (
        "10.0.0.1:1234", 4, 3)
    assert cluster_lib.process_settings(
        _args(process_id=1, num_processes=2), environ) == (
            "10.0.0.1:1234", 2, 1)
    assert cluster_lib.process_settings(
        _args(job_addresses="h0:1, h1:2", num_processes=2, process_id=0),
        {}) == ("h0:1,h1:2", 2, 0)


@pytest.mark.parametrize("values, environ, names", [
    (dict(job_addresses="h:1", num_processes=2, process_id=2), {},
     ["--process_id", "[0, 2)", "--process_id=2"]),
    (dict(job_addresses="h:1", num_processes=0, process_id=0), {},
     ["--num_processes", "--num_processes=0"]),
    (dict(num_processes=2, process_id=0), {},
     ["--job_addresses", "host:port"]),
    (dict(job_addresses="h", num_processes=2, process_id=0), {},
     ["--job_addresses", "--job_addresses=h"]),
    (dict(job_addresses="a:1,b:2,c:3", num_processes=2, process_id=0), {},
     ["--job_addresses", "one address"]),
    (dict(job_addresses="h:1", num_processes=2), {},
     ["--process_id", "--process_id=None"]),
    ({}, {"KERAS_DISTRIBUTION_NUM_PROCESSES": "two"},
     ["KERAS_DISTRIBUTION_NUM_PROCESSES", "'two'", "an integer"]),
])
def test_bad_settings_name_the_flag_or_variable(values, environ, names):
    with pytest.raises(ValueError) as error:
        cluster_lib.process_settings(_args(**values), environ)
    for name in names:
        assert name in str(error.value)


@pytest.mark.parametrize("backend, hint", [
    ("tensorflow", "--strategy=multi_worker"), ("torch", "one process")])
def test_processes_off_jax_are_a_clear_error(backend, hint):
    args = _args(job_addresses="h:1", num_processes=2, process_id=0,
                 strategy="one_device", tpu=None, distribution=None,
                 model_parallel=None)
    with pytest.raises(ValueError) as error:
        runtime.check_placement(args, backend)
    message = str(error.value)
    assert "--job_addresses" in message and "KERAS_BACKEND=jax" in message
    assert repr(backend) in message and hint in message


# ------------------------------------------------------ a process's share

@pytest.fixture
def second_of_two(monkeypatch):
    """This process as process 1 of 2 (no JAX joined: the batch shares)."""
    monkeypatch.setitem(cluster_lib._STATE, "process", (1, 2, "h:1"))


def test_each_process_reads_its_share_of_every_batch(second_of_two):
    import tensorflow as tf

    x = np.arange(24).reshape(12, 2)
    y = np.arange(12)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    shares = list(workers.local_batches(dataset).as_numpy_iterator())
    assert len(shares) == 3
    for i, (xs, ys) in enumerate(shares):
        np.testing.assert_array_equal(ys, [4 * i + 2, 4 * i + 3])
        np.testing.assert_array_equal(xs, x[4 * i + 2:4 * i + 4])
    single = tf.data.Dataset.from_tensor_slices({"a": x}).batch(6)
    (first, second) = workers.local_batches(single).as_numpy_iterator()
    np.testing.assert_array_equal(first["a"], x[3:6])


def test_a_batch_the_processes_cannot_share_is_an_error(second_of_two):
    import tensorflow as tf

    dataset = tf.data.Dataset.range(5).batch(5)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="--batch_size must be a multiple of "
                       "--num_processes"):
        list(workers.local_batches(dataset))
    with pytest.raises(ValueError, match=r"--batch_size`=15 .* multiple of "
                       r"--num_processes=2"):
        workers.check_batch_size(15)
    workers.check_batch_size(16)


def test_one_process_keeps_its_dataset_and_model():
    marker = object()
    assert workers.local_batches(marker) is marker
    with workers.local_model(marker) as model:
        assert model is marker
    assert runtime.stopped_peer(ValueError("Gloo failed")) is None


# ------------------------------------------------------ real processes

def _results(run_dir):
    with open(os.path.join(run_dir, "results.json")) as f:
        return json.load(f)


def _weights(run_dir):
    import keras_synth  # noqa: F401  (registers the classes)

    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"),
                                    compile=False)
    return [np.asarray(w) for w in model.get_weights()]


@needs_jax
def test_two_processes_train_as_one_process(tmp_path):
    """Two processes (one CPU device each, the global batch split) train
    the built-in GLUE task to the losses, dev accuracy and weights of one
    process with the same global batch, in EVERY epoch (3 epochs, dropout
    on, a per-epoch dev evaluation through `local_model` between them);
    the chief alone writes.

    The tolerance: with 256 examples, batch 16, 4 epochs (64 steps,
    dropout 0.1 or 0, learning rate 2e-3) the epoch losses of one process,
    one process with 2 devices (DataParallel) and two processes agree to
    1.5e-7 relative (1-2 float32 ulps, the order of the gradient sums), at
    every epoch, not only the first; 1e-5 leaves 100 times that. The
    README's longer run (300 steps, width 128) drifts further, by the same
    rounding amplified: two processes there give every digit of one
    process with two devices (docs/recipes/backends.md).
    """
    two, one = str(tmp_path / "two"), str(tmp_path / "one")
    argv = GLUE + ["--epochs=3", "--dropout=0.1"]
    cluster = Cluster(argv + [f"--model_dir={two}"],
                      environment=jax_process_env(2), log_dir=str(tmp_path))
    single = Cluster(argv + [f"--model_dir={one}"],
                     num_workers=1, environment=jax_process_env(1))
    try:
        codes = cluster.wait(timeout=600)
        assert codes == {0: 0, 1: 0}, cluster.output(0)[-3000:] + (
            cluster.output(1)[-3000:])
        assert single.wait(timeout=600) == {0: 0}
    finally:
        cluster.kill()
        single.kill()
    for index in (0, 1):
        assert f"this is process {index} of 2" in cluster.output(index)
    assert "Results: " in cluster.output(0)  # the chief writes
    assert "Results: " not in cluster.output(1)
    two_results, one_results = _results(two), _results(one)
    assert two_results["num_replicas"] == 2
    assert one_results["num_replicas"] == 1
    two_history, one_history = two_results["history"], one_results["history"]
    assert [h["epoch"] for h in two_history] == [1, 2, 3]
    assert [h["epoch"] for h in one_history] == [1, 2, 3]
    for a, b in zip(two_history, one_history):  # every epoch
        np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5,
                                   err_msg=f"epoch {a['epoch']}")
        np.testing.assert_allclose(a["accuracy"], b["accuracy"], atol=1e-6,
                                   err_msg=f"epoch {a['epoch']}")
        assert a["dev_accuracy"] == b["dev_accuracy"], a["epoch"]
    assert two_results["metrics"] == one_results["metrics"]
    assert two_results["optimizer_steps"] == one_results["optimizer_steps"]
    for a, b in zip(_weights(two), _weights(one)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@needs_jax
def test_a_killed_process_stops_the_run_clearly_and_both_resume(tmp_path):
    run_dir = str(tmp_path / "run")
    port = free_ports(1)[0]
    argv = GLUE + ["--epochs=3", f"--model_dir={run_dir}",
                   f"--job_addresses=127.0.0.1:{port}", "--num_processes=2"]

    def by_flags(index, ports):  # the flags, not the environment
        env = jax_process_env(2)(index, ports)
        for name in cluster_lib.ENVIRONMENT.values():
            env.pop(name)
        return env

    def start(log_dir):
        # One folder per process: each Cluster names its log worker-0.log.
        clusters = []
        for index in (0, 1):
            process_dir = os.path.join(log_dir, f"process-{index}")
            os.makedirs(process_dir)
            clusters.append(Cluster(
                argv + [f"--process_id={index}"], num_workers=1,
                environment=by_flags, log_dir=process_dir))
        return clusters

    first = start(str(tmp_path / "first"))
    backup = os.path.join(run_dir, "backup", "LATEST")
    try:
        assert first[0].wait_for_line(0, "Epoch 2/3", timeout=600), (
            first[0].output(0)[-3000:])
        assert os.path.isfile(backup)
        first[1].kill()
        codes = first[0].wait(timeout=120)
    finally:
        for process in first:
            process.kill()
    out = first[0].output(0)
    assert codes == {0: 2}, out[-3000:]
    assert ("python -m recipes.glue: error: Process 0 of 2: process 1 of "
            "the run stopped") in out
    assert "the run resumes from its last backup" in out
    assert ("python -m recipes.glue: error: Process 1 of 2 stopped before "
            "the run ended.") in first[1].output(0)  # its guard's line
    assert not os.path.exists(os.path.join(run_dir, "results.json"))
    # Where the stopped run got to: epoch 1, or epoch 2 when the chief
    # wrote that checkpoint before its next collective failed (the kill
    # races with epoch 2's four steps).
    with open(backup) as f:
        done = int(f.read().strip().split("-")[1])
    assert done in (1, 2)

    second = start(str(tmp_path / "second"))
    try:
        codes = [c.wait(timeout=600)[0] for c in second]
    finally:
        for process in second:
            process.kill()
    assert codes == [0, 0], second[0].output(0)[-3000:]
    assert f"Resuming after epoch {done} from" in second[0].output(0)
    results = _results(run_dir)
    assert results["resumed_from_epoch"] == done
    assert [h["epoch"] for h in results["history"]] == [1, 2, 3]
    assert results["optimizer_steps"] == 3 * (64 // 16)


@needs_jax
def test_a_process_whose_peers_never_come_up_stops_in_bounded_time(
        tmp_path):
    cluster = Cluster(GLUE + [f"--model_dir={tmp_path / 'run'}",
                              "--cluster_timeout=5"],
                      start=[1], environment=jax_process_env(2),
                      log_dir=str(tmp_path))
    try:
        codes = cluster.wait(timeout=120)
    finally:
        cluster.kill()
    out = cluster.output(1)
    assert codes == {1: -9}, out[-3000:]
    assert ("Process 1 of 2: the run's processes (coordinator, process 0, "
            "at 127.0.0.1:") in out
    assert "--cluster_timeout=5 seconds" in out
