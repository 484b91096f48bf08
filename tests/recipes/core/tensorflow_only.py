"""The skip marker for tests of the recipes' TensorFlow-only parts."""

import keras
import pytest

requires_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="tests of the recipes' TensorFlow parts (tf.distribute, "
    "tf.data, tensorflow-text, the SavedModel) run once, on TensorFlow; "
    "every recipe runs on every backend in tests/recipes/test_harness.py",
)

# For tests whose fresh processes choose their Keras backend themselves
# (they unset or set KERAS_BACKEND): the suite's backend does not change
# what they run, so the TensorFlow suite runs them, once.
once = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="its processes choose their own Keras backend (whatever the "
    "suite's), so it runs once, in the TensorFlow suite")
