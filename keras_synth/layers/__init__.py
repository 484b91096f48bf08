"""Public layers of keras-synth."""

import importlib.util

from keras_synth.layers.attention import SynthesizerAttention
from keras_synth.layers.synthesizers import VARIANTS
from keras_synth.layers.synthesizers import Synthesizer
from keras_synth.layers.synthesizers import get_synthesizer
from keras_synth.layers.synthesizers import register_synthesizer
from keras_synth.layers.synthesizers import registered_synthesizers

__all__ = [
    "SynthesizerAttention",
    "SynthesizerEncoder",
    "SynthesizerDecoder",
    "Synthesizer",
    "VARIANTS",
    "get_synthesizer",
    "register_synthesizer",
    "registered_synthesizers",
]

# The keras-nlp blocks need keras-hub (`pip install "keras-synth[nlp]"`).
# They are imported eagerly when it is installed, so that their classes are
# registered for deserialization by `import keras_synth` alone.
if importlib.util.find_spec("keras_hub") or importlib.util.find_spec(
    "keras_nlp"
):
    from keras_synth.layers.blocks import SynthesizerDecoder
    from keras_synth.layers.blocks import SynthesizerEncoder
else:  # pragma: no cover - exercised only without keras-hub

    def __getattr__(name):
        if name in ("SynthesizerEncoder", "SynthesizerDecoder"):
            raise ImportError(
                f"keras_synth.layers.{name} subclasses a keras-nlp block and "
                'needs keras-hub: pip install "keras-synth[nlp]"'
            )
        raise AttributeError(
            f"module 'keras_synth.layers' has no attribute {name!r}"
        )
