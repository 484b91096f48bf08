"""Precision of a recipe's run: Keras' dtype policy (`--mixed_precision`)
and the backend's float32 matrix-product precision (`--matmul_precision`).
"""

PRECISIONS = ("float32", "bfloat16", "float16")
# `--matmul_precision`: float32 matrix products and convolutions in full
# float32 ("highest") or in TensorFloat-32 where the GPU has it ("high").
MATMUL_PRECISIONS = ("highest", "high")
DEFAULT_MATMUL_PRECISION = "highest"


def configure_precision(mixed_precision):
    """Sets Keras' global dtype policy from `--mixed_precision`.

    `float16` gets dynamic loss scaling from `Model.compile`
    (`auto_scale_loss=True`); `bfloat16` needs none.
    """
    import keras

    if mixed_precision not in PRECISIONS:
        raise ValueError(
            f"Unknown precision {mixed_precision!r} (argument "
            f"`--mixed_precision`). Expected one of {PRECISIONS}."
        )
    policy = ("float32" if mixed_precision == "float32"
              else f"mixed_{mixed_precision}")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def configure_matmul_precision(precision):
    """Sets the backend's float32 matrix-product precision
    (`--matmul_precision`; TensorFlow, JAX or PyTorch).

    NVIDIA GPUs from Ampere on run float32 matrix products and convolutions
    in TensorFloat-32 (inputs rounded to a 10-bit mantissa) unless told
    otherwise, so a "float32" model differs from its CPU run by about 1e-3
    relatively. `"highest"` (the default) turns TF32 off: float32 is
    float32 on every device. `"high"` allows it (faster on such GPUs). CPUs
    and the bfloat16/float16 policies' products are unaffected.

    Raises:
        ValueError: naming `--matmul_precision`, for another value.
    """
    import keras

    if precision not in MATMUL_PRECISIONS:
        raise ValueError(
            f"Unknown matmul precision {precision!r} (argument "
            f"`--matmul_precision`). Expected one of {MATMUL_PRECISIONS}."
        )
    tf32 = precision == "high"
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision",
                          "tensorfloat32" if tf32 else "highest")
    elif backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    else:
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    return precision
