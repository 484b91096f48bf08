"""LoRA on the backbones: `enable_lora(rank)` targets each variant's
layers, leaves the outputs unchanged, trains only the adapters (and what
keras-hub leaves trainable), and `save_lora_weights`/`load_lora_weights`
and `.keras` files round trip."""

import math

import keras
import numpy as np
import pytest

from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerSeq2SeqBackbone
from tests.models.model_utils import LABELS
from tests.models.model_utils import TEXTS
from tests.models.model_utils import backbone_inputs
from tests.models.model_utils import make_backbone
from tests.models.model_utils import make_classifier
from tests.models.model_utils import to_numpy

RANK = 2
LENGTH = 16
HIDDEN, HEADS = 16, 2
# Variant -> the layer names `enable_lora` targets by default.
DEFAULT_NAMES = {
    "random+vanilla": ["value", "attention_output", "random", "query",
                       "key"],
    "dense": ["value", "attention_output", "dense", "hidden"],
    "factorized_random": ["value", "attention_output", "factorized_random"],
    "factorized_dense+fixed_random": ["value", "attention_output", "hidden"],
    "vanilla": ["value", "attention_output", "query", "key"],
}
KINDS = ("encoder", "seq2seq", "causal_lm")


def make(kind, synthesizer):
    """A small backbone of `kind` and an input dict for it."""
    keras.utils.set_random_seed(0)
    sizes = dict(vocabulary_size=40, num_layers=1, num_heads=HEADS,
                 hidden_dim=HIDDEN, intermediate_dim=32, dropout=0.0,
                 synthesizer=synthesizer, max_sequence_length=LENGTH)
    x = backbone_inputs(length=12, vocabulary_size=40, lengths=[12, 7])
    if kind == "encoder":
        return make_backbone(**sizes), x
    mask = x["padding_mask"]
    if kind == "causal_lm":
        return SynthesizerCausalLMBackbone(**sizes), {
            "token_ids": x["token_ids"], "padding_mask": mask}
    return SynthesizerSeq2SeqBackbone(**sizes), {
        "encoder_token_ids": x["token_ids"], "encoder_padding_mask": mask,
        "decoder_token_ids": x["token_ids"][:, ::-1].copy(),
        "decoder_padding_mask": np.ones_like(mask)}


def outputs(backbone, x):
    y = backbone(x)
    if isinstance(y, dict):
        y = y.get("sequence_output", y.get("decoder_sequence_output"))
    return to_numpy(y)


def adapted_layers(backbone):
    return [layer for layer in backbone._flatten_layers(include_self=False)
            if getattr(layer, "lora_enabled", False)]


def randomize_adapters(backbone, seed=3):
    rng = np.random.default_rng(seed)
    for layer in adapted_layers(backbone):
        layer.lora_kernel_b.assign(
            0.2 * rng.standard_normal(layer.lora_kernel_b.shape))


def expected_trainable_count(backbone):
    """Adapters `(m + n) * rank` per adapted matrix (per head for the
    synthesizers) plus the biases keras-hub leaves trainable on them."""
    count = 0
    for layer in adapted_layers(backbone):
        if hasattr(layer, "lora_shape"):  # a synthesizer
            heads, m, n = layer.lora_shape()
            count += heads * (m + n) * RANK
            bias = getattr(layer, "bias", None)
        else:  # keras' EinsumDense: `kernel (..., out)` as `(in, out)`
            shape = layer.kernel.shape
            count += (math.prod(shape[:-1]) + shape[-1]) * RANK
            bias = layer.bias
        if bias is not None:
            count += math.prod(bias.shape)
    return count


@pytest.mark.parametrize("synthesizer", sorted(DEFAULT_NAMES))
def test_default_lora_layer_names(synthesizer):
    backbone, _ = make("encoder", synthesizer)
    assert backbone.default_lora_layer_names() == DEFAULT_NAMES[synthesizer]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synthesizer", sorted(DEFAULT_NAMES))
def test_enable_lora_unchanged_outputs_and_trainable_weights(kind,
                                                             synthesizer):
    backbone, x = make(kind, synthesizer)
    before = outputs(backbone, x)
    backbone.enable_lora(RANK)
    np.testing.assert_allclose(outputs(backbone, x), before, atol=1e-5)
    expected_names = list(DEFAULT_NAMES[synthesizer])
    if kind == "seq2seq":  # + the vanilla cross-attention's query and key
        expected_names += [n for n in ("query", "key")
                           if n not in expected_names]
    assert backbone.default_lora_layer_names() == expected_names
    names = {layer.name for layer in adapted_layers(backbone)}
    assert names == set(expected_names)
    adapted = {id(layer) for layer in adapted_layers(backbone)}
    for layer in backbone._flatten_layers(include_self=False):
        for weight in layer._trainable_variables:
            if not weight.trainable:
                continue
            assert id(layer) in adapted, weight.path
            assert weight.name in ("lora_kernel_a", "lora_kernel_b",
                                   "bias"), weight.path
    count = sum(math.prod(w.shape) for w in backbone.trainable_weights)
    assert count == expected_trainable_count(backbone)
    total = sum(math.prod(w.shape) for w in backbone.weights)
    assert count < total / 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synthesizer", ["random+vanilla", "dense",
                                         "factorized_random"])
def test_lora_weights_save_and_load(kind, synthesizer, tmp_path):
    backbone, x = make(kind, synthesizer)
    other, _ = make(kind, synthesizer)
    other.set_weights(backbone.get_weights())
    backbone.enable_lora(RANK)
    randomize_adapters(backbone)
    expected = outputs(backbone, x)
    assert np.abs(expected - outputs(other, x)).max() > 1e-4
    path = str(tmp_path / "adapters.lora.h5")
    backbone.save_lora_weights(path)
    other.load_lora_weights(path)  # enables LoRA at the file's rank
    np.testing.assert_allclose(outputs(other, x), expected, atol=1e-5)


@pytest.mark.parametrize("synthesizer", ["random+vanilla", "dense",
                                         "factorized_random"])
def test_lora_tuned_backbone_keras_round_trip(synthesizer, tmp_path):
    backbone, x = make("encoder", synthesizer)
    backbone.enable_lora(RANK)
    randomize_adapters(backbone)
    expected = outputs(backbone, x)
    path = str(tmp_path / "tuned.keras")
    backbone.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(outputs(restored, x), expected, atol=1e-5)


@pytest.mark.parametrize("synthesizer", ["random", "dense",
                                         "factorized_random"])
def test_fit_changes_outputs_only_through_adapters(synthesizer):
    classifier = make_classifier(synthesizer)
    classifier.backbone.enable_lora(RANK)
    backbone = classifier.backbone
    frozen = {w.path: to_numpy(w) for w in backbone.weights
              if not w.trainable}
    before = to_numpy(classifier.predict(TEXTS, verbose=0))
    classifier.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    classifier.fit(TEXTS, LABELS, epochs=3, batch_size=8, verbose=0)
    for weight in backbone.weights:
        if weight.path in frozen:
            np.testing.assert_array_equal(to_numpy(weight),
                                          frozen[weight.path],
                                          err_msg=weight.path)
    synthesizers = [layer for layer in adapted_layers(backbone)
                    if layer.name == synthesizer]
    assert synthesizers and all(
        np.abs(to_numpy(s.lora_kernel_b)).max() > 0 for s in synthesizers)
    after = to_numpy(classifier.predict(TEXTS, verbose=0))
    assert np.abs(after - before).max() > 1e-3
