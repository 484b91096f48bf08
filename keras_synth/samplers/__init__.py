"""Samplers for `generate()` of the keras-synth tasks.

Every keras-hub sampler works by name or instance (`"greedy"`, `"top_k"`,
`"top_p"`, `"beam"`, `"random"`, ...); `LengthPenaltyBeamSampler` adds a
beam search that ranks finished hypotheses with GNMT's length penalty.
"""

from keras_synth import _lazy
from keras_synth.samplers.length_penalty_beam_sampler import (
    LengthPenaltyBeamSampler,
)
from keras_synth.samplers.length_penalty_beam_sampler import (
    length_penalty_factor,
)
from keras_synth.samplers.serialization import get

__all__ = ["LengthPenaltyBeamSampler", "get", "length_penalty_factor"]

# The package's other keras-hub classes too, for keras-hub's loaders.
_lazy.load_all()
