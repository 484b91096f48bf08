"""The suite's precision policy (tests/conftest.py): float32 matrix products
in full float32 on every backend, TensorFloat-32 off (docs/devices.md)."""

import keras

BACKEND = keras.backend.backend()


def test_tf32_is_off_for_the_backend_under_test():
    if BACKEND == "tensorflow":
        import tensorflow as tf

        assert not tf.config.experimental.tensor_float_32_execution_enabled()
    elif BACKEND == "jax":
        import jax

        assert jax.config.jax_default_matmul_precision == "highest"
    else:
        import torch

        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cudnn.allow_tf32
