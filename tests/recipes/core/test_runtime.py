"""recipes.core.runtime: the backend, the check of the flags against it
(`check_placement`), `setup`."""

import argparse
import os
import subprocess
import sys

import keras
import pytest

from recipes.core import compute
from recipes.core import devices
from recipes.core import flags
from recipes.core import runtime
from tests.recipes.core.tensorflow_only import once
from tests.recipes.core.tensorflow_only import requires_tensorflow
from tests.recipes.two_cpus import ROOT
from tests.recipes.two_cpus import run_with_two_cpus


def test_the_backend_is_the_users_choice(monkeypatch):
    # The suite's backend is kept (never replaced by TensorFlow).
    assert runtime.select_backend() == keras.backend.backend()
    monkeypatch.setattr(keras.backend, "backend", lambda: "numpy")
    with pytest.raises(RuntimeError, match=(
            r"train on the tensorflow, jax, torch backends, but "
            r"KERAS_BACKEND='numpy' is set")):
        runtime.select_backend()


@once
@pytest.mark.parametrize("backend", [None, "tensorflow", "jax", "torch"])
def test_keras_backend_defaults_to_tensorflow_only_when_unset(backend):
    # A fresh process: KERAS_BACKEND is read before Keras is imported.
    script = ("from recipes.core import runtime\n"
              "print('RESULT', runtime.select_backend())\n"
              "import keras; print('RESULT', keras.backend.backend())")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    if backend:
        env["KERAS_BACKEND"] = backend
    env["PYTHONPATH"] = ROOT
    process = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                             env=env, capture_output=True, text=True,
                             timeout=300)
    lines = [line.split()[1] for line in process.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert lines == [backend or "tensorflow"] * 2, process.stderr[-2000:]


@requires_tensorflow
def test_mirrored_strategy_uses_every_cpu_device_and_refuses_jit():
    # Two logical CPUs (and no GPU) in a fresh process: one replica each.
    result = run_with_two_cpus("""
        import json
        from recipes.core import data_files
        from recipes.core import flags
        from recipes.core import run_directory
        from recipes.core import compute
        from recipes.core import runtime
        from recipes.core import training
        from recipes.core import vocabulary

        import argparse

        strategy = compute.select_strategy("mirrored")

        def setup(jit_compile):
            args = argparse.Namespace(
                strategy="mirrored", tpu=None, seed=0, jit_compile=jit_compile,
                mixed_precision="float32")
            try:
                return runtime.setup(args, log=lambda *_: None
                                     ).num_replicas_in_sync
            except ValueError as error:
                return str(error)

        print("RESULT " + json.dumps({
            "replicas": strategy.num_replicas_in_sync,
            "devices": sorted(strategy.extended.worker_devices),
            "setup": setup(False), "setup_jit": setup(True)}))
    """)
    assert result["replicas"] == 2
    assert [d.rsplit("/", 1)[-1] for d in result["devices"]] == [
        "device:CPU:0", "device:CPU:1"]
    # `--jit_compile` over the two replicas is refused by `setup`.
    assert result["setup"] == 2
    assert result["setup_jit"].startswith(
        "Argument `--jit_compile` is not supported with "
        "`--strategy=mirrored` over 2 replicas"), result


@requires_tensorflow
def test_setup_logs_the_device_one_device_uses():
    import argparse

    import tensorflow as tf

    parser = argparse.ArgumentParser()
    flags.add_common_flags(parser)
    args = parser.parse_args([])
    assert args.matmul_precision == "highest"
    lines = []
    try:
        runtime.setup(args, log=lines.append)
        assert not tf.config.experimental.tensor_float_32_execution_enabled()
        if not tf.config.list_logical_devices("GPU"):
            # This machine has no GPU: one_device says it runs on the CPU.
            assert lines[-1] == ("Devices: CPU (no GPU found); float32 "
                                 "matmuls: highest (full float32, TF32 "
                                 "off).")
        args = parser.parse_args(["--matmul_precision=high"])
        runtime.setup(args, log=lines.append)
        assert tf.config.experimental.tensor_float_32_execution_enabled()
        assert lines[-1].endswith("float32 matmuls: high (TF32 allowed).")
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(False)
    with pytest.raises(ValueError, match=r"'medium'.*`--matmul_precision`"):
        devices.configure_matmul_precision("medium")


def parse(*argv):
    parser = argparse.ArgumentParser()
    flags.add_common_flags(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("argv, flag", [
    (["--strategy=mirrored"], "--strategy=mirrored"),
    (["--strategy=multi_worker"], "--strategy=multi_worker"),
    (["--strategy=tpu", "--tpu=local"], "--strategy=tpu"),
    (["--tpu=local"], "--tpu=local"),
])
def test_a_tf_distribute_strategy_off_tensorflow_names_both(
        backend, argv, flag):
    with pytest.raises(ValueError, match=(
            rf"Argument `{flag}` is a tf.distribute strategy of the "
            rf"TensorFlow backend, but KERAS_BACKEND='{backend}'. Run it "
            r"with KERAS_BACKEND=tensorflow")) as info:
        runtime.check_placement(parse(*argv), backend)
    if backend == "jax":
        assert "--distribution=data_parallel" in str(info.value)


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
@pytest.mark.parametrize("argv, flag", [
    (["--distribution=data_parallel"], "--distribution=data_parallel"),
    (["--distribution=model_parallel", "--model_parallel=2"],
     "--distribution=model_parallel"),
    (["--model_parallel=2"], "--model_parallel=2"),
])
def test_keras_distribution_off_jax_names_both(backend, argv, flag):
    with pytest.raises(ValueError, match=(
            rf"Argument `{flag}` is keras.distribution on the JAX backend, "
            rf"but KERAS_BACKEND='{backend}'. Run it with "
            r"KERAS_BACKEND=jax")) as info:
        runtime.check_placement(parse(*argv), backend)
    if backend == "tensorflow":
        assert "--strategy=mirrored" in str(info.value)


def test_model_parallel_needs_its_distribution():
    with pytest.raises(ValueError, match=(
            r"`--model_parallel` needs `--distribution=model_parallel`. "
            r"Received: --distribution=data_parallel, --model_parallel=2")):
        runtime.check_placement(
            parse("--distribution=data_parallel", "--model_parallel=2"),
            "jax")


@pytest.mark.parametrize("backend", compute.BACKENDS)
def test_the_defaults_are_accepted_on_every_backend(backend):
    runtime.check_placement(parse(), backend)


def test_an_error_that_is_no_stopped_peer_is_told_as_it_is(monkeypatch):
    # `run_main` prints a ValueError's own text: a malformed TF_CONFIG is
    # not read again to ask whether a worker stopped.
    monkeypatch.setenv("TF_CONFIG", "{not json")
    assert runtime.stopped_peer(ValueError("bad flag")) is None
