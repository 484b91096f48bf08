"""`quantize("int8")` of every task: straight after `from_preset`, the
synthesizers' logit weights int8 too, outputs within a stated tolerance of
float, `.keras` files and presets that reload with equal outputs."""

import os

import keras
import numpy as np
import pytest

from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models import SynthesizerCharTokenizer
from keras_synth.models import SynthesizerMaskedLM
from keras_synth.models import SynthesizerMaskedLMPreprocessor
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTokenizer
from tests.models.model_utils import VOCAB
from tests.models.model_utils import backbone_inputs
from tests.models.model_utils import make_backbone
from tests.models.model_utils import make_classifier
from tests.models.model_utils import to_numpy
from keras_synth.models.quantization import keras_hub_can_quantize

pytestmark = [pytest.mark.skipif(
    not keras_hub_can_quantize(),
    reason="keras-hub<0.23 cannot quantize its ReversibleEmbedding under "
    "this Keras (test_quantize_keras_hub_floor.py checks the error)"),
    pytest.mark.usefixtures("frozen_heap")]

LENGTH = 12
# |int8 task output - float| <= TOLERANCE * max |float output| (the logits):
# every Dense/EinsumDense is int8 with int8 activations (Keras), and the
# random logits and factors int8 with one scale per row.
TOLERANCE = 0.1
TASKS = {
    "classifier": SynthesizerTextClassifier,
    "masked_lm": SynthesizerMaskedLM,
    "seq2seq_lm": SynthesizerSeq2SeqLM,
    "causal_lm": SynthesizerCausalLM,
}
CHARS = ["romeo: who is there?", "juliet: it is i.", "good night."]


def sizes(synthesizer):
    return dict(num_layers=1, num_heads=2, hidden_dim=16,
                intermediate_dim=32, dropout=0.0, synthesizer=synthesizer,
                max_sequence_length=LENGTH)


def make_task(kind, synthesizer):
    """A small task with its preprocessor, and inputs for `task(inputs)`."""
    keras.utils.set_random_seed(0)
    x = backbone_inputs(batch=2, length=LENGTH, lengths=[LENGTH, 7])
    if kind == "classifier":
        return make_classifier(synthesizer, sequence_length=LENGTH), x
    if kind == "masked_lm":
        preprocessor = SynthesizerMaskedLMPreprocessor(
            SynthesizerTokenizer(VOCAB), sequence_length=LENGTH)
        backbone = make_backbone(synthesizer, LENGTH, num_layers=1)
        x["mask_positions"] = np.array([[1, 3], [2, 5]], "int32")
        return SynthesizerMaskedLM(backbone, preprocessor=preprocessor), x
    if kind == "seq2seq_lm":
        preprocessor = SynthesizerSeq2SeqLMPreprocessor(
            SynthesizerTokenizer(VOCAB), encoder_sequence_length=LENGTH,
            decoder_sequence_length=LENGTH)
        backbone = SynthesizerSeq2SeqBackbone(
            vocabulary_size=len(VOCAB), **sizes(synthesizer))
        mask = x["padding_mask"]
        inputs = {"encoder_token_ids": x["token_ids"],
                  "encoder_padding_mask": mask,
                  "decoder_token_ids": x["token_ids"][:, ::-1].copy(),
                  "decoder_padding_mask": np.ones_like(mask)}
        return SynthesizerSeq2SeqLM(backbone, preprocessor), inputs
    tokenizer = SynthesizerCharTokenizer(
        SynthesizerCharTokenizer.learn_vocabulary(CHARS))
    preprocessor = SynthesizerCausalLMPreprocessor(tokenizer,
                                                   sequence_length=LENGTH)
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), **sizes(synthesizer))
    ids = np.minimum(x["token_ids"], tokenizer.vocabulary_size() - 1)
    inputs = {"token_ids": ids, "padding_mask": x["padding_mask"]}
    return SynthesizerCausalLM(backbone, preprocessor), inputs


def int8_paths(model):
    return sorted(w.path for w in model.weights
                  if keras.backend.standardize_dtype(w.dtype) == "int8")


@pytest.mark.parametrize("kind", sorted(TASKS))
@pytest.mark.parametrize("synthesizer", ["random+vanilla",
                                         "factorized_random", "dense"])
def test_quantize_straight_after_from_preset(kind, synthesizer, tmp_path):
    """A float preset, loaded and quantized before any call; for
    random+vanilla the int8 task then saves to a `.keras` file and a
    preset that reload with its very outputs (one quantized task per
    kind serves both checks: `quantize` is most of a test's time)."""
    task, x = make_task(kind, synthesizer)
    expected = to_numpy(task(x))
    preset = str(tmp_path / "preset")
    task.save_to_preset(preset)
    loaded = TASKS[kind].from_preset(preset)
    loaded.quantize("int8")  # before any call
    actual = to_numpy(loaded(x))
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    assert 0 < error <= TOLERANCE, error
    paths = int8_paths(loaded)
    weights = {"random+vanilla": ["random/logits"],
               "factorized_random": ["factorized_random/left",
                                     "factorized_random/right"],
               "dense": ["dense/hidden/kernel"]}[synthesizer]
    for name in weights + ["value/kernel", "attention_output/kernel"]:
        assert any(p.endswith(name) for p in paths), (name, paths)
    if synthesizer == "random+vanilla":
        _check_int8_reloads(kind, loaded, x, actual, preset, tmp_path)


def _check_int8_reloads(kind, task, x, expected, float_preset, tmp_path):
    """The int8 `task` saved to `.keras` and to a preset reloads with the
    same int8 weights and outputs; its preset is smaller than the float
    one it came from."""
    path = str(tmp_path / "int8.keras")
    task.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    assert int8_paths(restored) == int8_paths(task)
    preset = str(tmp_path / "int8_preset")
    task.save_to_preset(preset)
    reloaded = TASKS[kind].from_preset(preset)
    np.testing.assert_array_equal(to_numpy(reloaded(x)), expected)
    assert int8_paths(reloaded) == int8_paths(task)
    assert preset_size(preset) < preset_size(float_preset)


def preset_size(path):
    return sum(os.path.getsize(os.path.join(path, f))
               for f in os.listdir(path) if f.endswith(".h5"))


@pytest.mark.parametrize("kind", ["seq2seq_lm", "causal_lm"])
def test_generate_after_quantize_and_reload(kind, tmp_path):
    task, _ = make_task(kind, "random+vanilla")
    prompts = (["ein hund"] if kind == "seq2seq_lm" else ["romeo"])
    task.generate(prompts, max_length=LENGTH)  # caches a generate function
    task.quantize("int8")
    generated = task.generate(prompts, max_length=LENGTH)
    path = str(tmp_path / "int8.keras")
    task.save(path)
    restored = keras.saving.load_model(path)
    assert restored.generate(prompts, max_length=LENGTH) == generated
