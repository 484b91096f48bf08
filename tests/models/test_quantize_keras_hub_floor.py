"""`quantize` on a keras-hub too old for this Keras: one clear error."""

import pytest

from keras_synth.models.quantization import keras_hub_can_quantize
from tests.models.model_utils import make_backbone


@pytest.mark.skipif(keras_hub_can_quantize(),
                    reason="this keras-hub quantizes (tests/models/"
                    "test_quantization.py)")
def test_old_keras_hub_quantize_names_the_floor():
    backbone = make_backbone("random")
    weights = [w.copy() for w in backbone.get_weights()]
    with pytest.raises(RuntimeError, match=r"needs keras-hub>=0\.23 .*"
                       r"does not take the `config` argument"):
        backbone.quantize("int8")
    # Nothing was touched before the error.
    assert all((a == b).all() for a, b in zip(backbone.get_weights(), weights))
