"""Every backbone checks its sizes first, with the argument and value named."""

import re

import pytest

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerSeq2SeqBackbone

SIZES = dict(vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
             intermediate_dim=16, max_sequence_length=8)
BACKBONES = [SynthesizerBackbone, SynthesizerCausalLMBackbone,
             SynthesizerSeq2SeqBackbone]


@pytest.mark.parametrize("cls", BACKBONES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("name, value, message", [
    ("hidden_dim", 15, "Argument `hidden_dim`=15 must be divisible by "
                       "`num_heads`=2."),
    ("num_heads", 3, "Argument `hidden_dim`=8 must be divisible by "
                     "`num_heads`=3."),
    ("num_layers", 0, "Argument `num_layers` must be a positive int. "
                      "Received: num_layers=0"),
    ("vocabulary_size", True, "Argument `vocabulary_size` must be a positive "
                              "int. Received: vocabulary_size=True"),
    ("max_sequence_length", None, "Argument `max_sequence_length` must be a "
                                  "positive int. Received: "
                                  "max_sequence_length=None"),
])
def test_bad_size_is_named(cls, name, value, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cls(**dict(SIZES, **{name: value}))


@pytest.mark.parametrize("cls", BACKBONES, ids=lambda cls: cls.__name__)
def test_good_sizes_build(cls):
    assert cls(**SIZES).hidden_dim == 8
