"""keras-synth: Synthesizer attention for Keras 3.

`import keras_synth` imports Keras and `SynthesizerAttention` only. The
keras-nlp blocks (`SynthesizerEncoder`, `SynthesizerDecoder`),
`keras_synth.models` and `keras_synth.samplers` need keras-hub
(`pip install "keras-synth[nlp]"`), which imports TensorFlow: they are
imported on first use. Files that name them load after `import keras_synth`
alone (`keras.saving.load_model`, keras-hub's `from_preset`).
"""

import importlib.util

from keras_synth import _lazy
from keras_synth import layers
from keras_synth.layers import SynthesizerAttention
from keras_synth.version import __version__

__all__ = ["SynthesizerAttention", "layers", "__version__"]
if importlib.util.find_spec("keras_hub") or importlib.util.find_spec(
        "keras_nlp"):
    __all__ += ["SynthesizerEncoder", "SynthesizerDecoder", "models"]

# Imported on first use (`_lazy`), with keras-hub.
_LAZY = {
    "SynthesizerEncoder": "keras_synth.layers.blocks:SynthesizerEncoder",
    "SynthesizerDecoder": "keras_synth.layers.blocks:SynthesizerDecoder",
    "models": "keras_synth.models",
    "samplers": "keras_synth.samplers",
}


def __getattr__(name):
    return _lazy.lazy_attribute(__name__, name, _LAZY)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


_lazy.register_stubs()
_lazy.watch_keras_hub()
