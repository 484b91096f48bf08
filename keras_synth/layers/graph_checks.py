"""Run-time checks of lengths known only when a TensorFlow graph runs.

The layers use `keras.ops` only, with this one exception, and only on the
TensorFlow backend: `keras.ops` has no assertion, and a `tf.function`
without XLA leaves a sequence length unknown until the graph runs, so a
length past `max_length` could only be reported then. `graph_check`
returns a `tf.debugging.Assert` op in that one case and `None` everywhere
else (eager tensors, JAX, PyTorch, XLA), where the value is known and
checked in Python or the layer's outputs are NaN (`attention_cache`).
TensorFlow is imported here only when Keras already runs on it.
Shared by the modules of this package; not part of the public API.
"""

import keras


def graph_check(condition, message, value):
    """A run-time check of a symbolic `condition`, where the backend has one.

    Only a TensorFlow graph (`tf.function` without XLA) leaves a length
    unknown until it runs and can raise then: this returns a
    `tf.debugging.Assert` op whose error (`InvalidArgumentError`) reads
    `message` with its `{}` replaced by `value`; `with_checks` makes the
    layer's work wait for it. Everywhere else (eager tensors, JAX, whose
    shapes are static under `jax.jit`, PyTorch) it returns `None`: there
    the value is known and checked in Python. Under XLA (`jit_compile`)
    TensorFlow drops assertions; shapes are static there, and an
    out-of-range slice fails to compile instead.
    """
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    if tf.executing_eagerly() or not tf.is_tensor(condition):
        return None
    # (The eager caller's exception keeps the start and the end of a long
    # message, not its middle: put what matters first.)
    return tf.debugging.Assert(
        condition, [tf.strings.format(message, [value])]
    )


def with_checks(checks, *tensors):
    """`tensors` (each maybe `None`), made to wait for the `graph_check` ops
    in `checks` (`None` entries ignored), so that a failing check raises
    before any op that depends on these tensors runs."""
    checks = [c for c in checks if c is not None]
    if not checks:
        return tensors
    import tensorflow as tf

    with tf.control_dependencies(checks):
        return tuple(None if t is None else tf.identity(t) for t in tensors)
