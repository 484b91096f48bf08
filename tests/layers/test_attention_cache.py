"""Decoding positions past `max_length` or past the cache: never clamped.

A known index (a Python int, an eager tensor) raises a `ValueError` with an
exact message; a traced index (`jax.jit`, `tf.function` with XLA) cannot
raise through backend-neutral ops, so the outputs are NaN instead of the
output at a clamped position; TensorFlow's XLA bridge may instead refuse to
compile the out-of-range slice (docs/design.md, "Decoding cache layouts").
A traced write past the cache's end (compiled on JAX and TensorFlow) gives
NaN outputs and NaN in the cache rows the clamped write hit.
"""

import re

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from tests.layers.layer_harness import BACKEND
from tests.layers.layer_harness import compiled
from tests.layers.layer_harness import randomize

B, D, H, K, L = 2, 8, 2, 4, 4
QUERY_MESSAGE = (
    "Query positions 6...6 exceed max_length=4. Expected "
    "query_start_index + query length <= max_length."
)


def message_lines(error):
    """The lines of an error's message; Keras wraps a layer's message in
    lines of its own (the layer, the call's arguments) and in bold."""
    return [re.sub(r"\x1b\[[0-9;]*m", "", line)
            for line in str(error).splitlines()]


def _layer(synthesizer):
    keras.utils.set_random_seed(3)
    layer = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                 synthesizer=synthesizer)
    x = np.random.default_rng(0).standard_normal((B, 1, D)).astype("float32")
    layer(x, x)
    randomize(layer)
    return layer, x


@pytest.mark.parametrize("synthesizer", ["random", "dense", "random+vanilla"])
@pytest.mark.parametrize("as_tensor", [False, True], ids=["int", "tensor"])
def test_eager_index_past_max_length_raises(synthesizer, as_tensor):
    layer, x = _layer(synthesizer)
    cache = layer.initial_cache(B)
    index = ops.convert_to_tensor(6) if as_tensor else 6
    with pytest.raises(ValueError) as error:
        layer(x, x, cache=cache, cache_update_index=index)
    assert QUERY_MESSAGE in message_lines(error.value)


@pytest.mark.parametrize("as_tensor", [False, True], ids=["int", "tensor"])
def test_eager_write_past_the_cache_raises(as_tensor):
    layer, x = _layer("random+vanilla")
    cache = layer.initial_cache(B, 3)
    index = ops.convert_to_tensor(3) if as_tensor else 3
    message = (
        "Argument `cache_update_index`=3 writes 1 position(s) into a cache "
        "of length 3. Expected 0 <= cache_update_index <= 3 - 1."
    )
    with pytest.raises(ValueError) as error:
        layer(x, x, cache=cache, cache_update_index=index)
    assert message in message_lines(error.value)


@pytest.mark.skipif(BACKEND == "torch",
                    reason="PyTorch runs eagerly: the index is always known")
@pytest.mark.parametrize("synthesizer", ["random", "dense", "random+vanilla"])
def test_traced_index_past_max_length_gives_nan(synthesizer):
    layer, x = _layer(synthesizer)
    cache = layer.initial_cache(B)

    if BACKEND == "jax":
        def step(trainable, non_trainable, x, cache, index):
            return layer.stateless_call(
                trainable, non_trainable, x, x, cache=cache,
                cache_update_index=index,
            )[0][0]

        fn = compiled(step)

        def run(index):
            return ops.convert_to_numpy(fn(
                [v.value for v in layer.trainable_variables],
                [v.value for v in layer.non_trainable_variables],
                x, cache, index))
    else:
        fn = compiled(lambda x, cache, index: layer(
            x, x, cache=cache, cache_update_index=index)[0])

        def run(index):
            return ops.convert_to_numpy(fn(
                ops.convert_to_tensor(x), cache, ops.convert_to_tensor(index)))

    for index in range(L):  # in range: the eager values
        expected = layer(x, x, cache=cache, cache_update_index=index)[0]
        np.testing.assert_allclose(run(index), ops.convert_to_numpy(expected),
                                   rtol=1e-5, atol=1e-5)
    for index in (L, 6, -1):  # out of range: never the clamped output
        if BACKEND == "tensorflow":
            import tensorflow as tf

            # TF's XLA bridge compiles a slice's start as a constant where
            # it can (the random logits): then compiling raises.
            try:
                output = run(index)
            except tf.errors.InvalidArgumentError as error:
                assert re.search(r"Expected (size|begin)\[1\] in \[0, \d\]",
                                 str(error)), error
                continue
        else:
            output = run(index)
        assert np.isnan(output).all(), index


@pytest.mark.parametrize("synthesizer", ["random", "dense", "random+vanilla"])
def test_traced_write_past_the_cache_is_reported(synthesizer):
    """A cache of 3 rows in a layer of max_length 4: index 3 keeps the query
    inside max_length but writes past the cache. Compiled (jax.jit, XLA and
    plain `tf.function` on TensorFlow) the index is traced: the outputs are
    NaN and so are the cache rows the clamped write hit (row 2), the other
    rows keep their values. PyTorch runs eagerly: a tensor index raises."""
    layer, x = _layer(synthesizer)
    rng = np.random.default_rng(5)
    cache = ops.convert_to_tensor(rng.standard_normal(
        tuple(layer.initial_cache(B, 3).shape)).astype("float32"))
    message = (
        "Argument `cache_update_index`=3 writes 1 position(s) into a cache "
        "of length 3. Expected 0 <= cache_update_index <= 3 - 1."
    )
    if BACKEND == "torch":
        with pytest.raises(ValueError) as error:
            layer(x, x, cache=cache, cache_update_index=ops.convert_to_tensor(3))
        assert message in message_lines(error.value)
        return
    if BACKEND == "jax":
        def step(trainable, non_trainable, x, cache, index):
            return layer.stateless_call(
                trainable, non_trainable, x, x, cache=cache,
                cache_update_index=index,
            )[0]

        fn = compiled(step)
        runs = {"jit": lambda index: fn(
            [v.value for v in layer.trainable_variables],
            [v.value for v in layer.non_trainable_variables],
            x, cache, index)}
    else:
        import tensorflow as tf

        def step(x, cache, index):
            return layer(x, x, cache=cache, cache_update_index=index)

        runs = {
            name: (lambda fn: lambda index: fn(
                tf.constant(x), cache, tf.constant(index)))(
                    tf.function(step, jit_compile=jit))
            for name, jit in (("xla", True), ("graph", False))
        }
    before = ops.convert_to_numpy(cache)
    for name, run in runs.items():
        output, new_cache = (ops.convert_to_numpy(t) for t in run(2))
        expected, expected_cache = layer(x, x, cache=cache,
                                         cache_update_index=2)
        np.testing.assert_allclose(output, ops.convert_to_numpy(expected),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(new_cache,
                                   ops.convert_to_numpy(expected_cache),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
        output, new_cache = (ops.convert_to_numpy(t) for t in run(3))
        assert np.isnan(output).all(), name
        # The clamped write landed on row 2: NaN there, nothing else changed.
        assert np.isnan(new_cache[:, :, 2]).all(), name
        np.testing.assert_array_equal(new_cache[:, :, :2], before[:, :, :2])
