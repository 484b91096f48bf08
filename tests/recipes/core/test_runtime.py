"""recipes.core.runtime."""

import os

import keras
import pytest

from recipes.core import runtime
from tests.recipes.core.tensorflow_only import requires_tensorflow
from tests.recipes.two_cpus import run_with_two_cpus


@pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                    reason="checks the error under another backend")
def test_recipes_refuse_other_backends():
    with pytest.raises(RuntimeError, match="KERAS_BACKEND=tensorflow"):
        runtime.require_tensorflow_backend()


@requires_tensorflow
def test_select_strategy():
    import tensorflow as tf

    strategy = runtime.select_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    strategy = runtime.select_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match=r"--tpu.*is required"):
        runtime.select_strategy("tpu")
    with pytest.raises(ValueError, match=r"needs `--strategy=tpu`"):
        runtime.select_strategy("one_device", tpu="local")
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        runtime.select_strategy("gpu")


@requires_tensorflow
def test_mirrored_strategy_uses_every_cpu_device_and_refuses_jit():
    # Two logical CPUs (and no GPU) in a fresh process: one replica each.
    result = run_with_two_cpus("""
        import json
        from recipes.core import data_files
        from recipes.core import flags
        from recipes.core import run_directory
        from recipes.core import runtime
        from recipes.core import training
        from recipes.core import vocabulary

        import argparse

        strategy = runtime.select_strategy("mirrored")

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
@pytest.mark.parametrize("precision, policy", [
    ("float32", "float32"), ("bfloat16", "mixed_bfloat16"),
    ("float16", "mixed_float16")])
def test_configure_precision(precision, policy):
    try:
        assert runtime.configure_precision(precision) == policy
        assert keras.config.dtype_policy().name == policy
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="Unknown precision"):
        runtime.configure_precision("int8")


WORKERS = '{"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}, '


@pytest.mark.parametrize("config, chief", [
    (WORKERS + '"task": {"type": "worker", "index": 0}}', True),
    (WORKERS + '"task": {"type": "worker", "index": 1}}', False),
    ('{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, '
     '"task": {"type": "worker", "index": 0}}', False),
    ('{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, '
     '"task": {"type": "chief", "index": 0}}', True),
    ("", True),
])
def test_tf_config_names_the_chief(monkeypatch, config, chief):
    monkeypatch.setenv("TF_CONFIG", config)
    assert runtime.is_chief() is chief
    cluster, kind, index = runtime.parse_tf_config()
    if config:
        assert kind in cluster and 0 <= index < len(cluster[kind])
    else:
        assert (cluster, kind, index) == (None, None, None)


@pytest.mark.parametrize("config, problem", [
    ("{cluster: 1}", "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"task": {"type": "worker", "index": 0}}', 'has no "cluster"'),
    ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker", '
     '"index": 0}}', "not as a non-empty list of \"host:port\" strings"),
    ('{"cluster": {"worker": ["a"]}, "task": {"type": "worker", '
     '"index": 0}}', "not as a non-empty list"),
    ('{"cluster": {"workers": ["a:1"]}, "task": {"type": "worker", '
     '"index": 0}}', "unknown job 'workers'"),
    ('{"cluster": {"worker": ["a:1"]}}', 'has no "task"'),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", '
     '"index": 0}}', "type 'chief', which is not a job"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", '
     '"index": 2}}', r"index 2; the 'worker' job has 2 address\(es\)"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", '
     '"index": "0"}}', "index '0'"),
])
def test_a_malformed_tf_config_is_named_with_what_was_expected(
        monkeypatch, config, problem):
    monkeypatch.setenv("TF_CONFIG", config)
    with pytest.raises(ValueError, match=problem) as info:
        runtime.parse_tf_config()
    message = str(info.value)
    assert message.startswith("Environment variable `TF_CONFIG` ")
    assert f"Received: TF_CONFIG={config!r}" in message
    assert '{"cluster": {"worker": ["host0:port0"' in message  # expected
    with pytest.raises(ValueError):
        runtime.is_chief()


@requires_tensorflow
def test_multi_worker_needs_tf_config_and_a_positive_timeout(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the environment variable "
                       "TF_CONFIG"):
        runtime.select_strategy("multi_worker")
    with pytest.raises(ValueError, match="--cluster_timeout=0"):
        runtime.select_strategy("multi_worker", cluster_timeout=0)


@requires_tensorflow
def test_chief_first_is_prepare_without_a_cluster(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    calls = []
    strategy = runtime.select_strategy("one_device")
    assert runtime.chief_first(
        strategy, lambda: calls.append(1) or "ready") == "ready"
    assert calls == [1]


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
        runtime.configure_matmul_precision("medium")


def test_describe_devices_names_each_gpu_model(monkeypatch):
    import types

    def strategy(*devices):
        return types.SimpleNamespace(
            extended=types.SimpleNamespace(worker_devices=devices))

    monkeypatch.setattr(runtime, "_gpu_names", lambda: {
        "GPU:0": "NVIDIA H200", "GPU:1": "NVIDIA H200"})
    prefix = "/job:localhost/replica:0/task:0/device:"
    assert runtime.describe_devices(strategy(prefix + "GPU:0")) == (
        "GPU:0 (NVIDIA H200)")
    assert runtime.describe_devices(strategy(
        prefix + "GPU:0", prefix + "GPU:1")) == (
        "GPU:0 (NVIDIA H200), GPU:1 (NVIDIA H200)")
    assert runtime.describe_devices(strategy(prefix + "CPU:0")) == (
        "CPU (no GPU found)")
    assert runtime.describe_devices(strategy(
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
        from recipes.core import runtime
        strategy = runtime.select_strategy("mirrored")
        print("RESULT " + json.dumps([strategy.num_replicas_in_sync,
                                      runtime.describe_devices(strategy)]))
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
        runtime.split_logical_devices({"KERAS_SYNTH_LOGICAL_DEVICES": "two"})
    assert runtime.split_logical_devices({}) == 1


@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker"])
def test_jit_compile_is_refused_over_several_mirrored_replicas(strategy):
    with pytest.raises(ValueError, match=(
            rf"`--jit_compile` is not supported with `--strategy={strategy}` "
            r"over 2 replicas: .*resources placed on another device.*"
            r"turns XLA off under tf.distribute")):
        runtime.check_jit_compile(True, strategy, 2)
    runtime.check_jit_compile(False, strategy, 2)  # no XLA: fine
    runtime.check_jit_compile(True, strategy, 1)  # one replica: compiled


def test_jit_compile_is_allowed_on_one_device_and_tpu():
    runtime.check_jit_compile(True, "one_device", 1)
    runtime.check_jit_compile(True, "tpu", 8)
