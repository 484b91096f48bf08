"""keras-synth: Synthesizer attention for Keras 3."""

from keras_synth import layers
from keras_synth.layers import SynthesizerAttention
from keras_synth.version import __version__

__all__ = ["SynthesizerAttention", "layers", "__version__"]

try:  # The keras-nlp blocks, when keras-hub is installed.
    from keras_synth.layers import SynthesizerDecoder
    from keras_synth.layers import SynthesizerEncoder

    __all__ += ["SynthesizerEncoder", "SynthesizerDecoder"]
except ImportError:  # pragma: no cover - without keras-hub
    pass

try:  # Backbones and tasks in keras-hub's model API, with keras-hub.
    from keras_synth import models

    __all__ += ["models"]
except ImportError:  # pragma: no cover - without keras-hub
    pass
