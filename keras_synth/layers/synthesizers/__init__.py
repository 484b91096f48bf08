"""The synthesizers: one variant per module, each a `Synthesizer` subclass
that owns its options, weights, logits and cost, found by name in the
registry (`register_synthesizer`, `get_synthesizer`)."""

# Imported in the paper's order, which is the registry's order, then the
# convolutions (Wu et al., 2019).
from keras_synth.layers.synthesizers.base import Synthesizer
from keras_synth.layers.synthesizers.base import scaled
from keras_synth.layers.synthesizers.dense import DenseSynthesizer
from keras_synth.layers.synthesizers.random import FixedRandomSynthesizer
from keras_synth.layers.synthesizers.random import RandomSynthesizer
from keras_synth.layers.synthesizers.factorized_dense import (  # noqa: I001
    FactorizedDenseSynthesizer,
)
from keras_synth.layers.synthesizers.factorized_random import (
    FactorizedRandomSynthesizer,
)
from keras_synth.layers.synthesizers.vanilla import VanillaSynthesizer
from keras_synth.layers.synthesizers.light_conv import LightConvSynthesizer
from keras_synth.layers.synthesizers.dynamic_conv import (
    DynamicConvSynthesizer,
)
from keras_synth.layers.synthesizers.registry import deserialize_options
from keras_synth.layers.synthesizers.registry import get_synthesizer
from keras_synth.layers.synthesizers.registry import parse_synthesizer
from keras_synth.layers.synthesizers.registry import register_synthesizer
from keras_synth.layers.synthesizers.registry import registered_synthesizers
from keras_synth.layers.synthesizers.registry import select_options
from keras_synth.layers.synthesizers.registry import serialize_options
from keras_synth.layers.synthesizers.registry import split_options
from keras_synth.layers.synthesizers.registry import variants_of

# The built-in variants, in the paper's order (user-defined ones are in
# `registered_synthesizers()`).
VARIANTS = (
    "dense",
    "random",
    "fixed_random",
    "factorized_dense",
    "factorized_random",
    "vanilla",
)
# The convolution synthesizers (Wu et al., 2019), built in as well: a
# window of `kernel_size` keys per query, no `max_length`.
CONV_VARIANTS = ("light_conv", "dynamic_conv")

__all__ = [
    "CONV_VARIANTS",
    "DenseSynthesizer",
    "DynamicConvSynthesizer",
    "FactorizedDenseSynthesizer",
    "FactorizedRandomSynthesizer",
    "FixedRandomSynthesizer",
    "LightConvSynthesizer",
    "RandomSynthesizer",
    "Synthesizer",
    "VARIANTS",
    "VanillaSynthesizer",
    "deserialize_options",
    "get_synthesizer",
    "parse_synthesizer",
    "register_synthesizer",
    "registered_synthesizers",
    "scaled",
    "select_options",
    "serialize_options",
    "split_options",
    "variants_of",
]
