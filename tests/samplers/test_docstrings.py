"""The Examples in keras_synth.samplers' docstrings run as written."""

import doctest

import pytest

from keras_synth.samplers import length_penalty_beam_sampler
from keras_synth.samplers import serialization


@pytest.mark.parametrize("module", [length_penalty_beam_sampler, serialization],
                         ids=lambda m: m.__name__)
def test_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
