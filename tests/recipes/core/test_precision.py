"""recipes.core.precision."""

import keras
import pytest

from recipes.core import precision as precision_lib
from tests.recipes.core.tensorflow_only import requires_tensorflow


@requires_tensorflow
@pytest.mark.parametrize("precision, policy", [
    ("float32", "float32"), ("bfloat16", "mixed_bfloat16"),
    ("float16", "mixed_float16")])
def test_configure_precision(precision, policy):
    try:
        assert precision_lib.configure_precision(precision) == policy
        assert keras.config.dtype_policy().name == policy
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="Unknown precision"):
        precision_lib.configure_precision("int8")
