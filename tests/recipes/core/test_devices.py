"""recipes.core.devices: logical devices, their description and the
precision."""

import os

import keras
import pytest

from recipes.core import devices
from tests.recipes.core.tensorflow_only import requires_tensorflow


def test_describe_devices_names_each_gpu_model(monkeypatch):
    import types

    def strategy(*devices):
        return types.SimpleNamespace(
            extended=types.SimpleNamespace(worker_devices=devices))

    monkeypatch.setattr(devices, "_gpu_names", lambda: {
        "GPU:0": "NVIDIA H200", "GPU:1": "NVIDIA H200"})
    prefix = "/job:localhost/replica:0/task:0/device:"
    assert devices.describe_devices(strategy(prefix + "GPU:0")) == (
        "GPU:0 (NVIDIA H200)")
    assert devices.describe_devices(strategy(
        prefix + "GPU:0", prefix + "GPU:1")) == (
        "GPU:0 (NVIDIA H200), GPU:1 (NVIDIA H200)")
    assert devices.describe_devices(strategy(prefix + "CPU:0")) == (
        "CPU (no GPU found)")
    assert devices.describe_devices(strategy(
        prefix + "CPU:0", prefix + "CPU:1")) == "CPU:0, CPU:1 (no GPU found)"


@requires_tensorflow
def test_logical_devices_from_the_environment():
    # A fresh process: the split must come before TensorFlow initialises.
    import json
    import subprocess
    import sys

    from tests.recipes.two_cpus import ROOT

    script = """if True:
        import json
        from recipes.core import compute
        from recipes.core import devices
        strategy = compute.select_strategy("mirrored")
        print("RESULT " + json.dumps([strategy.num_replicas_in_sync,
                                      devices.describe_devices(strategy)]))
    """
    env = dict(os.environ, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               KERAS_SYNTH_LOGICAL_DEVICES="3", PYTHONPATH=ROOT)
    process = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                             env=env, capture_output=True, text=True,
                             timeout=300)
    lines = [line for line in process.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    assert json.loads(lines[-1][7:]) == [
        3, "CPU:0, CPU:1, CPU:2 (no GPU found)"]
    with pytest.raises(ValueError, match=r"KERAS_SYNTH_LOGICAL_DEVICES='two'"):
        devices.split_logical_devices({"KERAS_SYNTH_LOGICAL_DEVICES": "two"})
    assert devices.split_logical_devices({}) == 1


@requires_tensorflow
@pytest.mark.parametrize("precision, policy", [
    ("float32", "float32"), ("bfloat16", "mixed_bfloat16"),
    ("float16", "mixed_float16")])
def test_configure_precision(precision, policy):
    try:
        assert devices.configure_precision(precision) == policy
        assert keras.config.dtype_policy().name == policy
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="Unknown precision"):
        devices.configure_precision("int8")
