"""The skip marker for tests of the recipes' TensorFlow-only parts."""

import keras
import pytest

requires_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="tf.distribute, tf.data and tensorflow-text need the TensorFlow "
    "backend (the recipes run on it only)",
)
