"""recipes.core.runtime."""

import os
import subprocess
import sys

import keras
import pytest

from recipes.core import precision
from recipes.core import runtime
from recipes.core import strategies
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
        from recipes.core import runtime
        from recipes.core import strategies
        from recipes.core import training
        from recipes.core import vocabulary

        import argparse

        strategy = strategies.select_strategy("mirrored")

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

    from recipes.core import flags

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
        precision.configure_matmul_precision("medium")
