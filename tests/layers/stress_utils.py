"""Helpers of the stress tests: fast calls and gradients on every backend.

On JAX, op-by-op (eager) execution compiles every primitive for every new
shape and dtype; tracing the whole call once with `jax.jit` is several times
faster for the many small, differently shaped cases of these tests.
"""

import keras
import numpy as np

from tests import backend_utils

BACKEND = keras.backend.backend()


def run_layer(layer, *args, **kwargs):
    """`layer(*args, **kwargs)`; on JAX traced once with `jax.jit` (through
    `__call__`, so input casting and mixed-precision autocasting apply)."""
    if BACKEND != "jax":
        return layer(*args, **kwargs)
    import jax

    variables = list(layer.variables)

    def forward(values, *arrays):
        with keras.StatelessScope(
            state_mapping=list(zip(variables, values))
        ):
            return layer(*arrays, **kwargs)

    return jax.jit(forward)([v.value for v in variables], *args)


def gradients(loss_fn, variables):
    """`tests.backend_utils.gradients`, jitted on JAX."""
    if BACKEND != "jax":
        return backend_utils.gradients(loss_fn, variables)
    import jax

    def stateless_loss(values):
        with keras.StatelessScope(
            state_mapping=list(zip(variables, values))
        ):
            return loss_fn()

    grads = jax.jit(jax.grad(stateless_loss))([v.value for v in variables])
    return [np.asarray(g) for g in grads]
