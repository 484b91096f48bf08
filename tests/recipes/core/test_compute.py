"""recipes.core.compute: the tf.distribute strategy, `--jit_compile`, and
the stand-in of JAX and PyTorch."""

import argparse

import keras
import pytest

from recipes.core import compute
from recipes.core import flags
from tests.recipes.core.tensorflow_only import requires_tensorflow


@requires_tensorflow
def test_select_strategy():
    import tensorflow as tf

    strategy = compute.select_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    strategy = compute.select_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match=r"--tpu.*is required"):
        compute.select_strategy("tpu")
    with pytest.raises(ValueError, match=r"needs `--strategy=tpu`"):
        compute.select_strategy("one_device", tpu="local")
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        compute.select_strategy("gpu")


@requires_tensorflow
def test_multi_worker_needs_tf_config_and_a_positive_timeout(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the environment variable "
                       "TF_CONFIG"):
        compute.select_strategy("multi_worker")
    with pytest.raises(ValueError, match="--cluster_timeout=0"):
        compute.select_strategy("multi_worker", cluster_timeout=0)


@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker"])
def test_jit_compile_is_refused_over_several_mirrored_replicas(strategy):
    with pytest.raises(ValueError, match=(
            rf"`--jit_compile` is not supported with `--strategy={strategy}` "
            r"over 2 replicas: .*resources placed on another device.*"
            r"turns XLA off under tf.distribute")):
        compute.check_jit_compile(True, strategy, 2)
    compute.check_jit_compile(False, strategy, 2)  # no XLA: fine
    compute.check_jit_compile(True, strategy, 1)  # one replica: compiled


def test_jit_compile_is_allowed_on_one_device_and_tpu():
    compute.check_jit_compile(True, "one_device", 1)
    compute.check_jit_compile(True, "tpu", 8)


def parse(*argv):
    parser = argparse.ArgumentParser()
    flags.add_common_flags(parser)
    return parser.parse_args(list(argv))


@pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                    reason="the stand-in of JAX and PyTorch")
def test_jax_and_torch_get_the_neutral_stand_in():
    strategy = compute.select(parse(), keras.backend.backend())
    assert isinstance(strategy, compute.BackendStrategy)
    assert strategy.distribution is None
    assert strategy.num_replicas_in_sync == 1
    assert len(strategy.worker_devices) == 1
    with strategy.scope():  # a no-op scope: variables as Keras places them
        variable = keras.Variable(1.0)
    assert float(keras.ops.convert_to_numpy(variable)) == 1.0


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="tf.distribute on TensorFlow")
def test_tensorflow_keeps_tf_distribute():
    import tensorflow as tf

    strategy = compute.select(parse(), "tensorflow")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
