"""Small helpers shared by the layer modules.

Integer checks, initializer copies, the Keras mask attached to a tensor,
reading a boolean tensor's value when it has one (eager) or not (traced)
and a branch on it, whether the backend computes on an accelerator, a
slice at a tensor offset that PyTorch's export can trace, and an
`EinsumDense` whose bias broadcasts alike on every backend.
(Run-time checks of a TensorFlow graph are in `graph_checks`.)
Shared by the modules of this package; not part of the public API.
"""

import contextlib
import functools
import threading

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


_EXPORT = threading.local()


@contextlib.contextmanager
def tracing_for_export(format=None):
    """Inside: the model is being traced for an exported file, of `format`
    (`"onnx"`, `"litert"`, `"tf_saved_model"`; `None`: a SavedModel of our
    own export functions). Layers write ops that format's converter has
    where a backend's usual op has none (`export_format`)."""
    previous = getattr(_EXPORT, "format", None)
    _EXPORT.format = format or "tf_saved_model"
    try:
        yield
    finally:
        _EXPORT.format = previous


def export_format():
    """The format of the open `tracing_for_export` block, or `None`."""
    return getattr(_EXPORT, "format", None)


def is_tracing_for_export():
    """Whether a `tracing_for_export` block is open in this thread."""
    return export_format() is not None


def is_int(value):
    """Whether `value` is a Python int (not a bool, not a tensor)."""
    return isinstance(value, int) and not isinstance(value, bool)


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that no two weights share one."""
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())


@functools.cache
def on_accelerator():
    """Whether this process's backend computes on a GPU or TPU (where
    Keras places tensors by default), not on the CPU.

    Read from Keras (`keras.distribution.list_devices`, which lists the
    accelerators first where there are any; PyTorch, which Keras's
    distribution API does not cover: the device of a new tensor), so that
    no backend is imported here.
    """
    try:
        devices = keras.distribution.list_devices()
    except AttributeError:  # PyTorch: no distribution backend
        devices = [str(getattr(ops.zeros(()), "device", "cpu"))]
    return any(not str(d).lower().startswith("cpu") for d in devices)


def concrete_bool(x):
    """`bool(x)` for an eager tensor, `None` while tracing (jit, tf.function)."""
    try:
        return bool(ops.convert_to_numpy(x))
    except Exception:  # a tracer or symbolic tensor has no value yet
        return None


def branch(pred, true_fn, false_fn):
    """`ops.cond(pred, true_fn, false_fn)`, run as a Python branch when
    `pred` has a value (eager).

    PyTorch tensors always have one, except under `torch.export` (which
    Keras's ONNX and LiteRT exports use): there a branch on a tensor's
    value cannot be traced (`GuardOnDataDependentSymNode`; Keras's PyTorch
    `cond` is a Python `if`), so both branches are computed and
    `ops.where` keeps one. Only for the forward pass of an export: a
    gradient through the branch not taken may be NaN.
    """
    concrete = concrete_bool(pred)
    if concrete is not None:
        return true_fn() if concrete else false_fn()
    if keras.backend.backend() == "torch":
        return ops.where(pred, true_fn(), false_fn())
    return ops.cond(pred, true_fn, false_fn)


def slice_rows(x, start, size):
    """`ops.slice(x, start, size)`; on PyTorch, the axes whose start is a
    tensor (a cache index) are gathered instead (`start + arange(size)`,
    the same values): `torch.export`, which Keras's ONNX and LiteRT
    exports use, cannot bound the size of a slice that starts at a tensor
    ("unbacked" symbol)."""
    dynamic = [axis for axis, s in enumerate(start) if not is_int(s)]
    if not dynamic or keras.backend.backend() != "torch":
        return ops.slice(x, start, size)
    x = ops.slice(
        x, [0 if axis in dynamic else s for axis, s in enumerate(start)],
        [ops.shape(x)[axis] if axis in dynamic else n
         for axis, n in enumerate(size)])
    for axis in dynamic:
        rows = ops.cast(start[axis], "int32") + ops.arange(
            0, size[axis], dtype="int32")
        x = ops.take(x, rows, axis=axis)
    return x


class EinsumDense(keras.layers.EinsumDense):
    """`keras.layers.EinsumDense` whose bias broadcasts like NumPy everywhere.

    On TensorFlow, `keras.ops.add(x, bias)` (used by Keras' `EinsumDense`)
    turns into `tf.nn.bias_add` whenever the bias squeezes to one dimension
    that matches `x.shape[1]` or `x.shape[-1]`; for a per-head bias of shape
    `(H, 1)` (`key_dim` or `value_dim` 1) and a sequence of length `H` it
    adds the bias along the sequence axis instead of the head axis. The plain
    `+` of backend tensors broadcasts correctly on every backend.
    """

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras's `EinsumDense.quantize`, which refuses subclasses unless
        told not to check the type (this one only changes the float
        call's bias addition)."""
        return super().quantize(mode, type_check=False, config=config)

    def call(self, inputs, training=None):
        if self.bias is None:
            return super().call(inputs, training=training)
        x = ops.einsum(self.equation, inputs, self.kernel)
        x = x + ops.convert_to_tensor(self.bias.value, dtype=x.dtype)
        if self.activation is not None:
            x = self.activation(x)
        return x


def with_quantized_dtype(layer, config):
    """`config` (the layer's) with its `"dtype"` a `DTypePolicyMap` of the
    quantized sublayers' policies, when any is quantized, as keras-hub's
    `Backbone.get_config` does: `from_config` then builds those sublayers
    quantized, and their int8 weights load."""
    if isinstance(layer.dtype_policy, keras.dtype_policies.DTypePolicyMap):
        return config  # Serialized with its entries already.
    policy_map = keras.dtype_policies.DTypePolicyMap(
        default_policy=layer.dtype_policy)
    for sublayer in layer._flatten_layers(include_self=False):
        if sublayer.quantization_mode is not None:
            policy_map[sublayer.path] = sublayer.dtype_policy
    if len(policy_map):
        config["dtype"] = keras.dtype_policies.serialize(policy_map)
    return config
