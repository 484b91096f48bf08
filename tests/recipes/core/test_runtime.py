"""recipes.core.runtime."""

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
def test_mirrored_strategy_uses_every_cpu_device():
    # Two logical CPUs (and no GPU) in a fresh process: one replica each.
    result = run_with_two_cpus("""
        import json
        from recipes.core import data_files
        from recipes.core import flags
        from recipes.core import run_directory
        from recipes.core import runtime
        from recipes.core import training
        from recipes.core import vocabulary

        strategy = runtime.select_strategy("mirrored")
        print("RESULT " + json.dumps({
            "replicas": strategy.num_replicas_in_sync,
            "devices": sorted(strategy.extended.worker_devices)}))
    """)
    assert result["replicas"] == 2
    assert [d.rsplit("/", 1)[-1] for d in result["devices"]] == [
        "device:CPU:0", "device:CPU:1"]


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
