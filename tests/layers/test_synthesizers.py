"""Tests of helpers in `keras_synth.layers.synthesizers` (the variants
themselves are tested through `SynthesizerAttention` against NumPy)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers.synthesizers import factorized_dense as synth_lib
from tests.backend_utils import gradients


@pytest.mark.parametrize("sizes,key_length", [
    ((2, 3), 6),   # a * b == S: the gradient's grid needs no padding
    ((2, 3), 4),   # a * b > S: rows cut to S, gradient padded back
    ((3, 2), 5),
    ((1, 4), 3),
])
def test_factorized_rows_values_and_gradients_match_numpy(sizes, key_length):
    a, b = sizes
    rng = np.random.default_rng(0)
    left_np = rng.standard_normal((2, 3, 4, a)).astype("float32")
    right_np = rng.standard_normal((2, 3, 4, b)).astype("float32")
    weight_np = rng.standard_normal((2, 3, 4, key_length)).astype("float32")
    j = np.arange(key_length)
    expected = left_np[..., j // b] * right_np[..., j % b]
    # d sum(w * rows) / d left[i] = sum over j with j // b == i of
    # w[j] * right[j % b], and likewise for right.
    grad_left = np.zeros_like(left_np)
    grad_right = np.zeros_like(right_np)
    for s in range(key_length):
        grad_left[..., s // b] += weight_np[..., s] * right_np[..., s % b]
        grad_right[..., s % b] += weight_np[..., s] * left_np[..., s // b]

    left = keras.Variable(left_np)
    right = keras.Variable(right_np)
    weight = ops.convert_to_tensor(weight_np)

    def rows():
        return synth_lib.factorized_rows(
            left.value, right.value, sizes, key_length)

    np.testing.assert_allclose(
        ops.convert_to_numpy(rows()), expected, rtol=1e-6, atol=1e-6)
    got_left, got_right = gradients(
        lambda: ops.sum(rows() * weight), [left, right])
    np.testing.assert_allclose(got_left, grad_left, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_right, grad_right, rtol=1e-5, atol=1e-5)
