"""What the cached-decoding tests share: compiling a decoding loop for the
backend, and step-by-step decoding of an attention layer through its cache.
"""

import keras
from keras import ops


def compiled(fn, xla=True):
    """Compiles `fn` for the backend (PyTorch: Keras' loops run eagerly).

    TensorFlow compiles with XLA (`jit_compile=True`, as keras-nlp's
    `generate`) unless `xla=False` (a plain graph, faster to build).
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=xla)
    return fn


def decode_step_by_step(layer, x, max_length):
    """Causal self-attention of `x` one position at a time, with a cache.

    Every step `t` (inside `ops.fori_loop`) writes row `t` of an empty cache
    of `max_length` rows and attends from `x[:, t]`. Returns `(outputs,
    cache)`: the `(B, T, D)` outputs and the final cache.
    """
    batch_size, length, width = x.shape
    cache = layer.initial_cache(batch_size, max_length)
    outputs = ops.zeros((batch_size, length, width))

    def body(t, state):
        cache, outputs = state
        x_t = ops.slice(x, (0, t, 0), (batch_size, 1, width))
        y_t, cache = layer(
            x_t, x_t, use_causal_mask=True, cache=cache, cache_update_index=t
        )
        return cache, ops.slice_update(outputs, (0, t, 0), y_t)

    cache, outputs = ops.fori_loop(0, length, body, (cache, outputs))
    return outputs, cache
