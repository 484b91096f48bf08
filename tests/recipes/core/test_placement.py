"""recipes.core.placement: one place picks the strategy or distribution
per backend, and refuses another backend's flags by name."""

import argparse

import keras
import pytest

from recipes.core import distribution
from recipes.core import flags
from recipes.core import placement


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
        placement.check_placement(parse(*argv), backend)
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
        placement.check_placement(parse(*argv), backend)
    if backend == "tensorflow":
        assert "--strategy=mirrored" in str(info.value)


def test_model_parallel_needs_its_distribution():
    with pytest.raises(ValueError, match=(
            r"`--model_parallel` needs `--distribution=model_parallel`. "
            r"Received: --distribution=data_parallel, --model_parallel=2")):
        placement.check_placement(
            parse("--distribution=data_parallel", "--model_parallel=2"),
            "jax")


@pytest.mark.parametrize("backend", placement.BACKENDS)
def test_the_defaults_are_accepted_on_every_backend(backend):
    placement.check_placement(parse(), backend)


@pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                    reason="the stand-in of JAX and PyTorch")
def test_jax_and_torch_get_the_neutral_stand_in():
    strategy = placement.select(parse(), keras.backend.backend())
    assert isinstance(strategy, distribution.BackendStrategy)
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

    strategy = placement.select(parse(), "tensorflow")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)

