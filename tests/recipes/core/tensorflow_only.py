"""The skip marker for tests of the recipes' TensorFlow-only parts."""

import keras
import pytest

requires_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="tests of the recipes' TensorFlow parts (tf.distribute, "
    "tf.data, tensorflow-text, the SavedModel) run once, on TensorFlow; "
    "every recipe runs on every backend in tests/recipes/test_harness.py",
)
