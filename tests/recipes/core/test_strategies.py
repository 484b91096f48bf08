"""recipes.core.strategies: the tf.distribute strategy and `--jit_compile`."""

import pytest

from recipes.core import strategies
from tests.recipes.core.tensorflow_only import requires_tensorflow


@requires_tensorflow
def test_select_strategy():
    import tensorflow as tf

    strategy = strategies.select_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    strategy = strategies.select_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match=r"--tpu.*is required"):
        strategies.select_strategy("tpu")
    with pytest.raises(ValueError, match=r"needs `--strategy=tpu`"):
        strategies.select_strategy("one_device", tpu="local")
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        strategies.select_strategy("gpu")


@requires_tensorflow
def test_multi_worker_needs_tf_config_and_a_positive_timeout(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the environment variable "
                       "TF_CONFIG"):
        strategies.select_strategy("multi_worker")
    with pytest.raises(ValueError, match="--cluster_timeout=0"):
        strategies.select_strategy("multi_worker", cluster_timeout=0)


@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker"])
def test_jit_compile_is_refused_over_several_mirrored_replicas(strategy):
    with pytest.raises(ValueError, match=(
            rf"`--jit_compile` is not supported with `--strategy={strategy}` "
            r"over 2 replicas: .*resources placed on another device.*"
            r"turns XLA off under tf.distribute")):
        strategies.check_jit_compile(True, strategy, 2)
    strategies.check_jit_compile(False, strategy, 2)  # no XLA: fine
    strategies.check_jit_compile(True, strategy, 1)  # one replica: compiled


def test_jit_compile_is_allowed_on_one_device_and_tpu():
    strategies.check_jit_compile(True, "one_device", 1)
    strategies.check_jit_compile(True, "tpu", 8)
