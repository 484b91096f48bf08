"""`convert_keras_hub_backbone`: keras-hub BERT and GPT-2 backbones as
Synthesizer backbones with equal outputs, that can still learn to mix."""

import json
import re

import keras
import numpy as np
import pytest
from keras import ops

import keras_hub
from keras_synth.layers import register_synthesizer
from keras_synth.layers.synthesizers import RandomSynthesizer
from keras_synth.layers.synthesizers import Synthesizer
from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import convert_keras_hub_backbone
from tests.backend_utils import gradients

SIZES = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
             intermediate_dim=32, max_sequence_length=16)
SYNTHESIZERS = ["vanilla", "random+vanilla", "dense+vanilla",
                "factorized_random+vanilla", "factorized_dense+vanilla",
                "random+dense+vanilla"]
# The weight each variant's `zero_logits` zeroes (its gradient must not be).
ZEROED = {"random": "random/logits", "dense": "dense/kernel",
          "factorized_random": "factorized_random/right",
          "factorized_dense": "factorized_dense/kernel_b"}
TOL = dict(atol=1e-5, rtol=1e-5)


def _np(x):
    return ops.convert_to_numpy(x)


def _randomize(model, seed=0):
    """Non-trivial weights (biases, norms and embeddings included)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(0.4 * rng.standard_normal(tuple(weight.shape)).astype(
            "float32"))
    return model


def _bert(**kwargs):
    return _randomize(keras_hub.models.BertBackbone(**{**SIZES, **kwargs}))


def _gpt2():
    return _randomize(keras_hub.models.GPT2Backbone(**SIZES), seed=1)


def _inputs(segments=2, length=16):
    rng = np.random.default_rng(2)
    mask = np.arange(length)[None] < np.array([[length], [9], [3]])
    return {
        "token_ids": np.where(mask, rng.integers(1, 50, (3, length)), 0
                              ).astype("int32"),
        "segment_ids": (rng.integers(0, segments, (3, length)) * mask
                        ).astype("int32"),
        "padding_mask": mask.astype("int32"),
    }


def _causal(inputs):
    return {k: inputs[k] for k in ("token_ids", "padding_mask")}


@pytest.fixture(scope="module")
def bert():
    return _bert()


@pytest.fixture(scope="module")
def gpt2():
    return _gpt2()


@pytest.mark.parametrize("synthesizer", SYNTHESIZERS)
def test_bert_outputs_equal(bert, synthesizer):
    converted = convert_keras_hub_backbone(bert, synthesizer)
    assert type(converted) is SynthesizerBackbone
    assert converted.synthesizer == synthesizer
    assert (converted.pooling, converted.num_segments,
            converted.layer_norm_epsilon, converted.dropout) == (
        "cls_dense", 2, 1e-12, bert.dropout)
    inputs = _inputs()
    ours, theirs = converted(inputs), bert(inputs)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(_np(ours[name]), _np(theirs[name]), **TOL)
    # A shorter batch too (cut to its longest sequence).
    short = {k: v[:, :9] for k, v in inputs.items()}
    np.testing.assert_allclose(_np(converted(short)["sequence_output"]),
                               _np(bert(short)["sequence_output"]), **TOL)


@pytest.mark.parametrize("synthesizer", SYNTHESIZERS[:-1])
def test_gpt2_outputs_equal(gpt2, synthesizer):
    converted = convert_keras_hub_backbone(gpt2, synthesizer)
    assert type(converted) is SynthesizerCausalLMBackbone
    assert converted.normalize_first and converted.layer_norm_epsilon == 1e-5
    inputs = _causal(_inputs())
    np.testing.assert_allclose(_np(converted(inputs)), _np(gpt2(inputs)),
                               **TOL)


def test_gpt2_generates_what_gpt2_generates(gpt2):
    """Cached decoding reads the converted weights as the forward pass."""
    converted = convert_keras_hub_backbone(gpt2, "random+vanilla")
    inputs = _causal(_inputs())
    inputs["padding_mask"][:, :3] = 1
    inputs["padding_mask"][:, 3:] = 0
    theirs = keras_hub.models.GPT2CausalLM(gpt2, preprocessor=None)
    theirs.compile(sampler="greedy")
    ours = SynthesizerCausalLM(converted)
    ours.compile(sampler="greedy")
    np.testing.assert_array_equal(
        ours.generate(inputs, stop_token_ids=None)["token_ids"],
        theirs.generate(inputs, stop_token_ids=None)["token_ids"])


@pytest.mark.parametrize("synthesizer", [
    "random+dense+vanilla", "factorized_random+factorized_dense+vanilla"])
def test_synthesizers_and_mixture_can_learn(bert, synthesizer):
    """Zero logits, not zero gradients: the zeroed weights and the mixture
    weights get a gradient right after conversion."""
    converted = convert_keras_hub_backbone(bert, synthesizer)
    inputs = _inputs()
    target = np.random.default_rng(3).standard_normal((3, 16, 16))
    attention = converted.transformer_layers[0].self_attention
    variables = [attention.mixture_logits] + [
        w for s in attention.synthesizers if s.variant != "vanilla"
        for w in s.trainable_weights if w.path.endswith(ZEROED[s.variant])]
    assert len(variables) == len(attention.synthesizers)

    def loss():
        output = converted(inputs)["sequence_output"]
        return ops.sum(output * ops.convert_to_tensor(target, output.dtype))

    for variable, grad in zip(variables, gradients(loss, variables)):
        if variable is not attention.mixture_logits:
            assert not np.any(_np(variable)), variable.path  # zeroed
        assert np.abs(grad).max() > 1e-6, variable.path


def test_one_segment_bert_folds_its_segment_embedding():
    bert = _bert(num_segments=1)
    converted = convert_keras_hub_backbone(bert, "random+vanilla")
    assert converted.num_segments == 1 and converted.segment_embedding is None
    inputs = _inputs(segments=1)
    np.testing.assert_allclose(_np(converted(inputs)["pooled_output"]),
                               _np(bert(inputs)["pooled_output"]), **TOL)


@pytest.mark.parametrize("source", ["bert", "gpt2"])
def test_converted_config_round_trips(request, source):
    source = request.getfixturevalue(source)
    converted = convert_keras_hub_backbone(source, "dense+vanilla")
    config = json.loads(json.dumps(
        keras.saving.serialize_keras_object(converted)))
    restored = keras.saving.deserialize_keras_object(config)
    restored.set_weights(converted.get_weights())
    inputs = _inputs()
    if isinstance(converted, SynthesizerCausalLMBackbone):
        inputs = _causal(inputs)
    ours = keras.tree.flatten(restored(inputs))
    np.testing.assert_allclose(_np(ours[0]),
                               _np(keras.tree.flatten(source(inputs))[0]),
                               **TOL)


def test_unsupported_backbone_is_an_error(bert):
    ours = convert_keras_hub_backbone(bert, "vanilla")
    with pytest.raises(TypeError, match="`backbone`.*BertBackbone.*"
                       "Received: backbone of type SynthesizerBackbone"):
        convert_keras_hub_backbone(ours)


@pytest.mark.parametrize("synthesizer", ["random", "dense+random"])
def test_synthesizer_without_vanilla_is_an_error(bert, synthesizer):
    with pytest.raises(ValueError, match=r"`synthesizer`.*'vanilla'.*"
                       + re.escape(f"synthesizer={synthesizer!r}")):
        convert_keras_hub_backbone(bert, synthesizer)


def test_unknown_synthesizer_is_an_error(bert):
    with pytest.raises(ValueError, match="randm"):
        convert_keras_hub_backbone(bert, "randm+vanilla")


def test_options_the_length_cannot_use_are_an_error(bert):
    with pytest.raises(ValueError, match=r"max_sequence_length=16.*"
                       r"factorized_dense\+vanilla.*sizes"):
        convert_keras_hub_backbone(bert, "factorized_dense+vanilla",
                                   synthesizer_options={"sizes": (2, 2)})


def test_variant_without_zero_logits_is_an_error(bert, monkeypatch):
    with pytest.raises(NotImplementedError, match="fixed_random"):
        convert_keras_hub_backbone(bert, "fixed_random+vanilla")
    # A (user-defined) variant that keeps the base class's `zero_logits`.
    monkeypatch.setattr(RandomSynthesizer, "zero_logits",
                        Synthesizer.zero_logits)
    with pytest.raises(NotImplementedError,
                       match=r"synthesizer='random\+vanilla'.*'random'.*"
                       "does not implement `zero_logits"):
        convert_keras_hub_backbone(bert, "random+vanilla")


@register_synthesizer("conversion_test_decay", override=True)
class Decay(Synthesizer):
    """A user-defined variant, `L_h[t, s] = -rate_h |t - s|`, that supports
    conversion by implementing `zero_logits`."""

    batch_dependent = False
    needs_max_length = False

    def build(self, query_shape, key_shape):
        self.rate = self.add_logit_weight("rate", (self.num_heads,), "ones")

    def zero_logits(self):
        self.assign_zeros(self.rate)

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        rows = ops.arange(query_length) + query_start
        distance = ops.abs(rows[:, None] - ops.arange(key_length))
        return -self.rate[:, None, None] * ops.cast(distance,
                                                    self.logits_dtype)


def test_user_defined_variant_converts(gpt2):
    converted = convert_keras_hub_backbone(gpt2,
                                           "conversion_test_decay+vanilla")
    inputs = _causal(_inputs())
    np.testing.assert_allclose(_np(converted(inputs)), _np(gpt2(inputs)),
                               **TOL)
    [decay] = [s for s in converted.transformer_layers[0].self_attention
               .synthesizers if isinstance(s, Decay)]
    rate = decay.rate
    [grad] = gradients(lambda: ops.sum(ops.square(converted(inputs))), [rate])
    assert np.abs(grad).min() > 0


def test_other_head_layout_is_an_error():
    bert = _bert()
    bert.transformer_layers[1]._self_attention_layer._key_dim = 4
    with pytest.raises(ValueError, match=r"`backbone`.*block 1.*"
                       r"\(2, 4, 8, True\).*\(2, 8, 8, True\)"):
        convert_keras_hub_backbone(bert)


def test_pre_ln_bert_is_an_error():
    bert = _bert()
    for block in bert.transformer_layers:
        block.normalize_first = True
    with pytest.raises(ValueError, match="normalize_first=False.*"
                       "normalize_first=True"):
        convert_keras_hub_backbone(bert)


@pytest.mark.parametrize("lowercase", [True, False])
def test_bert_vocabulary_gives_bert_token_ids(lowercase):
    """docs/models.md: `SynthesizerTokenizer` on a BERT tokenizer's
    vocabulary and case settings packs what BERT's preprocessor packs."""
    vocabulary = (["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                  + ["a", "grand", "film", "dull", ".", "##s"])
    bert_tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary,
                                                    lowercase=lowercase)
    ours = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(vocabulary=bert_tokenizer.get_vocabulary(),
                             lowercase=bert_tokenizer.lowercase,
                             strip_accents=bert_tokenizer.strip_accents),
        sequence_length=10)
    theirs = keras_hub.models.BertTextClassifierPreprocessor(
        bert_tokenizer, sequence_length=10)
    texts = ["A grand films .", "dull", "a film . dull ? Grand"]
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(_np(ours(texts)[name]),
                                      _np(theirs(texts)[name]))
    pairs = (["a film", "Dull"], ["grand", "a dull film ."])
    ours, theirs = ours(x=pairs), theirs(x=pairs)
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(_np(ours[name]), _np(theirs[name]))
    assert np.any(_np(ours["segment_ids"]))
