"""Backend-agnostic helpers for tests (tests may import backends; layers may not)."""

import keras
import numpy as np


def gradients(loss_fn, variables):
    """Returns d loss_fn() / d variables as NumPy arrays (zeros where unused).

    `loss_fn` takes no arguments and computes a scalar from the layer's
    current variables; `variables` are built Keras variables.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for v in variables:
                tape.watch(v.value)
            loss = loss_fn()
        grads = tape.gradient(loss, [v.value for v in variables])
    elif backend == "jax":
        import jax

        def stateless_loss(values):
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values))
            ):
                return loss_fn()

        grads = jax.grad(stateless_loss)([v.value for v in variables])
    elif backend == "torch":
        import torch

        values = [v.value for v in variables]
        flags = [t.requires_grad for t in values]
        for t in values:
            t.requires_grad_(True)
        try:
            loss = loss_fn()
            grads = torch.autograd.grad(loss, values, allow_unused=True)
        finally:
            for t, flag in zip(values, flags):
                t.requires_grad_(flag)
    else:  # pragma: no cover
        raise ValueError(f"Unsupported backend {backend!r}")
    return [
        np.zeros(tuple(v.shape)) if g is None else keras.ops.convert_to_numpy(g)
        for v, g in zip(variables, grads)
    ]
