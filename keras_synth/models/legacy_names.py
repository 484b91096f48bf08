"""The registered names of release 0.1.0's recipe classes, kept loadable.

Release 0.1.0 registered two classes in the recipes, which the wheel does
not install: a byte-level language-model preset named the tokenizer
`recipes_lm>ByteTokenizer` (`recipes/lm/tokenizers.py`), a translation
`.keras` file the schedule of its optimizer
`recipes.translate>InverseSqrtSchedule` (`recipes/translate/modeling.py`).
Both classes now live in the package; their old names are registered here
as aliases of the new classes, so that `import keras_synth` alone loads
those files (Keras looks a `registered_name` up in its global custom
objects before anything else). New files name the new classes
(`keras_synth>SynthesizerByteTokenizer`, `keras_synth>InverseSqrtSchedule`).
"""

import keras

from keras_synth.models.schedules import InverseSqrtSchedule
from keras_synth.models.tokenizers.byte_tokenizer import (
    SynthesizerByteTokenizer,
)

LEGACY_NAMES = {
    "recipes_lm>ByteTokenizer": SynthesizerByteTokenizer,
    "recipes.translate>InverseSqrtSchedule": InverseSqrtSchedule,
}

keras.saving.get_custom_objects().update(LEGACY_NAMES)
