"""The one place that imports keras-hub (keras-nlp's new name, 0.18 on).

Blocks, models and samplers take `keras_hub` (and its older alias
`keras_nlp`) from here, so that the dependency and its fallback live in one
module. `keras_synth.layers.SynthesizerAttention` does not need it.
"""

from keras_synth import _lazy

with _lazy.importing_keras_hub():
    try:
        import keras_hub
    except ImportError:  # pragma: no cover - older installs
        import keras_nlp as keras_hub

    try:
        # keras-hub's preprocessors decorate `call` with it: inputs become
        # TensorFlow tensors, eager outputs the backend's tensors.
        from keras_hub.src.utils.tensor_utils import preprocessing_function
    except ImportError:  # pragma: no cover - older installs
        from keras_nlp.src.utils.tensor_utils import preprocessing_function

keras_nlp = keras_hub

__all__ = ["keras_hub", "keras_nlp", "preprocessing_function"]
