"""Small helpers shared by the layer modules.

Integer checks, initializer copies, the Keras mask attached to a tensor, and
reading a boolean tensor's value when it has one (eager) or not (traced).
Shared by the modules of this package; not part of the public API.
"""

import keras
from keras import ops

try:  # Keras keeps tensors' masks in a helper (MultiHeadAttention uses it).
    from keras.src.backend import get_keras_mask
    from keras.src.backend import set_keras_mask
except ImportError:  # pragma: no cover - older or newer Keras layouts

    def get_keras_mask(x):
        """The Keras mask attached to `x`, or `None`."""
        return getattr(x, "_keras_mask", None)

    def set_keras_mask(x, mask):
        """Attaches `mask` to `x` (`None` removes it)."""
        try:
            x._keras_mask = mask
        except AttributeError:
            pass


def is_int(value):
    """Whether `value` is a Python int (not a bool, not a tensor)."""
    return isinstance(value, int) and not isinstance(value, bool)


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that no two weights share one."""
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())


def concrete_bool(x):
    """`bool(x)` for an eager tensor, `None` while tracing (jit, tf.function)."""
    try:
        return bool(ops.convert_to_numpy(x))
    except Exception:  # a tracer or symbolic tensor has no value yet
        return None
