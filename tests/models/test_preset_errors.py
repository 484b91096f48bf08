"""Presets fail with messages that name the file and what is wrong
(issue #29): corrupt weights, a missing asset, a preset of another task."""

import os
import shutil

import pytest

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerMaskedLM
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer

VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "the", "plot", "is",
         "dull", "."]


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    backbone = SynthesizerBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=16, max_sequence_length=8, synthesizer="random")
    classifier = SynthesizerTextClassifier(
        backbone, 2, SynthesizerTextClassifierPreprocessor(
            SynthesizerTokenizer(VOCAB), sequence_length=8))
    path = str(tmp_path_factory.mktemp("presets") / "classifier")
    classifier.save_to_preset(path)
    return path


def copy(preset, tmp_path):
    target = str(tmp_path / "copy")
    shutil.copytree(preset, target)
    return target


@pytest.mark.parametrize("cls", [SynthesizerTextClassifier,
                                 SynthesizerBackbone, SynthesizerMaskedLM])
def test_corrupt_weights_name_the_file(classifier_preset, tmp_path, cls):
    preset = copy(classifier_preset, tmp_path)
    weights = os.path.join(preset, "model.weights.h5")
    with open(weights, "rb") as f:
        data = f.read()
    with open(weights, "wb") as f:
        f.write(data[: len(data) // 2])  # cut short
    with pytest.raises(OSError, match=(
            r"the weights file '.*model\.weights\.h5' of preset .* is "
            r"corrupt or incomplete")) as info:
        cls.from_preset(preset)
    assert isinstance(info.value.__cause__, OSError)  # h5py's, kept


def test_missing_asset_names_the_file(classifier_preset, tmp_path):
    preset = copy(classifier_preset, tmp_path)
    os.remove(os.path.join(preset, "assets", "tokenizer", "vocabulary.txt"))
    with pytest.raises(FileNotFoundError,
                       match="assets/tokenizer/vocabulary.txt"):
        SynthesizerTextClassifier.from_preset(preset)


@pytest.mark.parametrize("cls, expected", [
    (SynthesizerCausalLM, "SynthesizerCausalLMBackbone"),
    (SynthesizerCausalLMBackbone, "SynthesizerCausalLMBackbone"),
    (SynthesizerSeq2SeqLM, "SynthesizerSeq2SeqBackbone"),
])
def test_preset_of_another_task(classifier_preset, cls, expected):
    with pytest.raises(ValueError, match=(
            r"holds a `SynthesizerTextClassifier` \(backbone "
            rf"`SynthesizerBackbone`\), but `{cls.__name__}.from_preset` "
            rf"expects a preset with a `{expected}` backbone. Load it with "
            r"`SynthesizerTextClassifier.from_preset`")):
        cls.from_preset(classifier_preset)


def test_compatible_preset_of_another_task_loads(classifier_preset):
    # A masked LM from a classifier's preset: the same backbone class.
    assert isinstance(SynthesizerMaskedLM.from_preset(classifier_preset),
                      SynthesizerMaskedLM)
