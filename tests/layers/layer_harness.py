"""A shared test harness for keras-synth layers, after keras-hub's `run_layer_test`.

`run_layer_test` builds a layer, calls it, and checks in one place what every
layer and block owes its users: the output shape and finiteness, a
`get_config`/`from_config` round trip that computes the same values, a
`.keras` file round trip, a short `fit` that lowers the loss, a
mixed-precision run close to float32, and a compiled call (XLA on
TensorFlow, `jax.jit`) equal to the eager one.

The variant lists come from the package (`keras_synth.layers.VARIANTS` and
each synthesizer's `batch_dependent`), so a new variant is tested without
editing the tests.
"""

import math

import keras
import numpy as np
from keras import ops

from keras_synth.layers import VARIANTS
from keras_synth.layers import get_synthesizer
from keras_synth.layers.synthesizers import CONV_VARIANTS

BACKEND = keras.backend.backend()

BATCH_INDEPENDENT = tuple(
    name for name in VARIANTS if not get_synthesizer(name).batch_dependent
)
BATCH_DEPENDENT_SYNTHETIC = tuple(
    name for name in VARIANTS
    if get_synthesizer(name).batch_dependent and not get_synthesizer(name).uses_keys
)
DOT_PRODUCT = tuple(name for name in VARIANTS if get_synthesizer(name).uses_keys)
# One mixture per kind of combination: batch-independent with dot product,
# batch-dependent with dot product, the two synthetic kinds, and every
# variant at once.
MIXTURES = (
    f"{BATCH_INDEPENDENT[0]}+{DOT_PRODUCT[0]}",
    f"{BATCH_DEPENDENT_SYNTHETIC[0]}+{DOT_PRODUCT[0]}",
    f"{BATCH_INDEPENDENT[0]}+{BATCH_DEPENDENT_SYNTHETIC[0]}",
    "+".join(VARIANTS),
)
# The convolutions (a window of keys per query), alone and mixed.
CONVOLUTIONS = tuple(CONV_VARIANTS) + (
    f"{CONV_VARIANTS[-1]}+{DOT_PRODUCT[0]}",
    f"{CONV_VARIANTS[0]}+{BATCH_INDEPENDENT[0]}",
)
ALL_VARIANTS = tuple(VARIANTS) + MIXTURES + CONVOLUTIONS


def skip_unless_saved_model_export():
    """Keras 3 exports a TF SavedModel from TensorFlow and from JAX (both
    need TensorFlow, installed with the test dependencies); from PyTorch it
    goes through torch_xla, skipped where that is not installed."""
    import importlib.util

    import pytest

    if BACKEND == "torch" and importlib.util.find_spec("torch_xla") is None:
        pytest.skip("Keras exports a SavedModel from PyTorch through "
                    "torch_xla, which is not installed")


def randomize(layer, seed=0, scale=0.5):
    """Gives every weight (biases and mixture weights too) random values."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(
            (scale * rng.standard_normal(tuple(weight.shape))).astype(
                keras.backend.standardize_dtype(weight.dtype)
            )
        )


def logit_path_params(variant, d, heads, k, length, rank, kernel_size=3):
    """Parameters of the logit path (docs/design.md, "The variants") of
    `variant` for width `d`, `heads` heads of size `k`, `max_length`
    `length`, factorized rank `rank` and convolution `kernel_size`, biases
    and mixture weights included."""
    a = math.ceil(math.sqrt(length))
    b = math.ceil(length / a)
    per_variant = {
        "vanilla": 2 * (d * heads * k + heads * k),
        "dense": d * heads * k + heads * k + heads * k * length
        + heads * length,
        "random": heads * length * length,
        "fixed_random": heads * length * length,
        "factorized_dense": d * heads * k + heads * k
        + heads * k * (a + b) + heads * (a + b),
        "factorized_random": 2 * heads * length * rank,
        "light_conv": heads * kernel_size,
        "dynamic_conv": d * heads * kernel_size + heads * kernel_size,
    }
    names = variant.split("+")
    total = sum(per_variant[name] for name in names)
    if len(names) > 1:
        total += heads * len(names)
    return total


def assert_same_outputs_and_gradients(variables, out, grads, reference_out,
                                      reference_grads):
    """`out` and the gradients of `variables` are finite and equal to a
    reference computation's (gradients relative to the largest, if above
    1)."""
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, reference_out, rtol=1e-5, atol=1e-5)
    for variable, grad, reference in zip(variables, grads, reference_grads):
        assert np.isfinite(grad).all(), variable.path
        scale = max(1.0, float(np.abs(reference).max()))
        np.testing.assert_allclose(
            grad / scale, reference / scale, atol=2e-5, err_msg=variable.path
        )


def copy_weights(source, target):
    for s, t in zip(source.weights, target.weights):
        assert s.path.split("/")[1:] == t.path.split("/")[1:], (s.path, t.path)
        t.assign(ops.cast(s.value, t.dtype))


def to_numpy(x):
    return ops.convert_to_numpy(ops.cast(x, "float32"))


def compiled(fn):
    """`fn` compiled by XLA (TensorFlow, JAX); `None` on PyTorch, where
    layers run eagerly."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if BACKEND == "jax":
        import jax

        return jax.jit(fn)
    return None


def compiled_call(layer, inputs, **kwargs):
    """`layer(*inputs, **kwargs)` compiled; `None` where nothing compiles.

    Array keyword arguments are passed as arguments of the compiled
    function, other values (flags) are closed over.
    """
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    flags = {k: v for k, v in kwargs.items() if k not in tensors}
    if BACKEND == "jax":
        def fn(trainable, non_trainable, inputs, tensors):
            return layer.stateless_call(
                trainable, non_trainable, *inputs, **tensors, **flags
            )[0]

        fn = compiled(fn)
        return fn(
            [v.value for v in layer.trainable_variables],
            [v.value for v in layer.non_trainable_variables],
            tuple(inputs),
            tensors,
        )
    fn = compiled(lambda inputs, tensors: layer(*inputs, **tensors, **flags))
    if fn is None:
        return None
    return fn(
        tuple(ops.convert_to_tensor(x) for x in inputs),
        {k: ops.convert_to_tensor(v) for k, v in tensors.items()},
    )


def _first(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _model(layer, inputs, flags):
    symbolic = [keras.Input(x.shape[1:], dtype=x.dtype) for x in inputs]
    outputs = _first(layer(*symbolic, **flags))
    return keras.Model(symbolic, outputs)


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    call_kwargs=None,
    expected_output_shape=None,
    run_training=True,
    run_mixed_precision=True,
    run_saving=True,
    tmp_path=None,
):
    """Checks a layer end to end; see the module docstring.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: tuple of NumPy inputs (positional call arguments).
        call_kwargs: keyword call arguments; NumPy arrays (masks) are data,
            other values (flags such as `use_causal_mask`) are also used in
            the functional model of the saving and training checks.
        expected_output_shape: the shape of the (first) output.
        run_training, run_mixed_precision, run_saving: which checks to run.
        tmp_path: a folder for the `.keras` file (pytest's `tmp_path`).
    """
    call_kwargs = dict(call_kwargs or {})
    flags = {k: v for k, v in call_kwargs.items()
             if not isinstance(v, np.ndarray)}
    keras.utils.set_random_seed(0)
    layer = layer_cls(**init_kwargs)
    output = to_numpy(_first(layer(*inputs, **call_kwargs)))
    if expected_output_shape is not None:
        assert output.shape == tuple(expected_output_shape), output.shape
    assert np.isfinite(output).all()
    randomize(layer)
    output = to_numpy(_first(layer(*inputs, **call_kwargs)))

    # Config round trip: same config, same values with the same weights.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    clone(*inputs, **call_kwargs)
    copy_weights(layer, clone)
    np.testing.assert_allclose(
        to_numpy(_first(clone(*inputs, **call_kwargs))), output,
        rtol=1e-6, atol=1e-6,
    )

    # Compiled call: the same values as the eager call.
    result = compiled_call(layer, inputs, **call_kwargs)
    if result is not None:
        np.testing.assert_allclose(
            to_numpy(result), output, rtol=1e-5, atol=1e-5
        )

    if run_saving:
        model = _model(layer, inputs, flags)
        expected = to_numpy(model(list(inputs)))
        path = str(tmp_path / f"{layer.name}.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        np.testing.assert_allclose(
            to_numpy(restored(list(inputs))), expected, rtol=1e-6, atol=1e-6
        )

    if run_training:
        keras.utils.set_random_seed(1)
        model = _model(layer_cls(**init_kwargs), inputs, flags)
        target = np.random.default_rng(2).standard_normal(
            output.shape
        ).astype("float32")
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        before = float(model.evaluate(list(inputs), target, verbose=0))
        model.fit(list(inputs), target, epochs=5, batch_size=len(target),
                  verbose=0)
        after = float(model.evaluate(list(inputs), target, verbose=0))
        assert np.isfinite(after) and after < before, (before, after)

    if run_mixed_precision:
        mixed = layer_cls(**dict(init_kwargs, dtype="mixed_bfloat16"))
        mixed_output = _first(mixed(*inputs, **call_kwargs))
        assert keras.backend.standardize_dtype(mixed_output.dtype) == (
            "bfloat16"
        )
        copy_weights(layer, mixed)
        mixed_output = to_numpy(_first(mixed(*inputs, **call_kwargs)))
        # bfloat16 keeps 8 significant bits: a relative error of 2^-8 per
        # rounding, a few roundings deep (projections, values, output).
        np.testing.assert_allclose(mixed_output, output, rtol=0.05,
                                   atol=0.05 * np.abs(output).mean())
    return layer
