"""`SynthesizerSeq2SeqLM`: fit on strings, cached generate, saving."""

import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_hub
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.samplers import LengthPenaltyBeamSampler

BACKEND = keras.backend.backend()
# (self-attention, cross-attention) variants; values-only caches for pure
# synthesizers, keys and values with a dot-product part.
VARIANTS = [
    ("random", "vanilla"),
    ("dense", "vanilla"),
    ("vanilla", "vanilla"),
    ("random+vanilla", "vanilla"),
    ("random", "random"),
]
LENGTH = 10
SOURCES = ["ein hund läuft .", "eine katze schläft .", "ein mann läuft ."]
TARGETS = ["a dog runs .", "a cat sleeps .", "a man runs ."]
VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"] + sorted(
    {w for t in SOURCES + TARGETS for w in t.split()}
)


def _np(x):
    return ops.convert_to_numpy(x)


def _backbone(variant=("random", "vanilla"), **kwargs):
    keras.utils.set_random_seed(0)
    args = dict(
        vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=LENGTH,
        synthesizer=variant[0], cross_attention_synthesizer=variant[1],
        dropout=0.0,
    )
    args.update(kwargs)
    backbone = SynthesizerSeq2SeqBackbone(**args)
    rng = np.random.default_rng(1)
    for weight in backbone.weights:
        weight.assign(0.3 * rng.standard_normal(weight.shape))
    return backbone


def _lm(variant=("random", "vanilla"), **kwargs):
    preprocessor = SynthesizerSeq2SeqLMPreprocessor(
        SynthesizerTokenizer(VOCAB, lowercase=True),
        encoder_sequence_length=LENGTH,
        decoder_sequence_length=LENGTH,
    )
    return SynthesizerSeq2SeqLM(_backbone(variant, **kwargs), preprocessor)


def _inputs():
    """Sources of different lengths; decoder prompts of lengths 1, 1, 3."""
    rng = np.random.default_rng(2)
    encoder_ids = rng.integers(5, len(VOCAB), (3, LENGTH)).astype("int32")
    encoder_mask = np.arange(LENGTH)[None] < np.array([[4], [7], [10]])
    decoder_ids = np.zeros((3, LENGTH), "int32")
    decoder_mask = np.zeros((3, LENGTH), bool)
    decoder_ids[:, 0] = 1
    decoder_mask[:, 0] = True
    decoder_ids[2, 1:3] = [6, 7]
    decoder_mask[2, 1:3] = True
    return {
        "encoder_token_ids": np.where(encoder_mask, encoder_ids, 0),
        "encoder_padding_mask": encoder_mask,
        "decoder_token_ids": decoder_ids,
        "decoder_padding_mask": decoder_mask,
    }


def _forward(lm, inputs, decoder_ids):
    features = dict(inputs, decoder_token_ids=decoder_ids,
                    decoder_padding_mask=np.ones_like(decoder_ids))
    return _np(lm(features))


def _argmax_path(lm, inputs):
    """Greedy decoding with full (uncached) forward passes, in NumPy."""
    ids = np.array(inputs["decoder_token_ids"])
    mask = inputs["decoder_padding_mask"]
    for index in range(mask.sum(-1).min(), LENGTH):
        token = _forward(lm, inputs, ids)[:, index - 1].argmax(-1)
        ids[:, index] = np.where(mask[:, index], ids[:, index], token)
    return ids


@pytest.mark.parametrize("variant", VARIANTS, ids="-".join)
def test_shapes_and_cache_layouts(variant):
    lm = SynthesizerSeq2SeqLM(_backbone(variant))
    inputs = _inputs()
    out = lm.backbone(inputs)
    assert tuple(out["encoder_sequence_output"].shape) == (3, LENGTH, 16)
    assert tuple(out["decoder_sequence_output"].shape) == (3, LENGTH, 16)
    self_caches, cross_caches = lm._initialize_cache(
        ops.convert_to_tensor(inputs["encoder_token_ids"]),
        ops.convert_to_tensor(inputs["decoder_token_ids"]),
    )
    self_slots = 2 if "vanilla" in variant[0] else 1
    cross_slots = 2 if "vanilla" in variant[1] else 1
    assert [tuple(c.shape) for c in self_caches] == [
        (3, self_slots, LENGTH, 2, 8)] * 2
    assert [tuple(c.shape) for c in cross_caches] == [
        (3, cross_slots, LENGTH, 2, 8)] * 2


@pytest.mark.parametrize("variant", VARIANTS, ids="-".join)
def test_cached_greedy_equals_uncached_argmax_path(variant):
    lm = SynthesizerSeq2SeqLM(_backbone(variant))
    inputs = _inputs()
    out = lm.generate(inputs, stop_token_ids=None)
    np.testing.assert_array_equal(
        out["decoder_token_ids"], _argmax_path(lm, inputs)
    )


@pytest.mark.parametrize("variant", [("random", "vanilla"),
                                     ("random", "random")], ids="-".join)
def test_cached_beam_equals_uncached_beam(variant):
    lm = SynthesizerSeq2SeqLM(_backbone(variant))
    sampler = LengthPenaltyBeamSampler(num_beams=3, length_penalty=0.6)
    lm.compile(sampler=sampler)
    inputs = _inputs()
    cached = lm.generate(inputs, stop_token_ids=None)["decoder_token_ids"]

    # The uncached search sees the sources repeated per beam, as the cache.
    beams_inputs = {k: ops.convert_to_tensor(np.repeat(v, 3, axis=0))
                    for k, v in inputs.items() if k.startswith("encoder")}

    def next(prompt, cache, index):
        features = dict(beams_inputs, decoder_token_ids=prompt,
                        decoder_padding_mask=ops.ones_like(prompt))
        return lm(features)[:, index - 1], None, cache

    uncached = sampler(
        next,
        ops.convert_to_tensor(inputs["decoder_token_ids"]),
        index=1,
        mask=inputs["decoder_padding_mask"],
    )
    np.testing.assert_array_equal(cached, _np(uncached))


def test_fit_loss_falls_and_generate_strings():
    lm = _lm()
    lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    data = {"encoder_text": SOURCES * 4, "decoder_text": TARGETS * 4}
    history = lm.fit(data, batch_size=4, epochs=6, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    out = lm.generate(SOURCES)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)
    assert isinstance(lm.generate("ein hund läuft ."), str)
    # A decoder prompt is continued.
    prompted = lm.generate({"encoder_text": ["ein hund läuft ."],
                            "decoder_text": ["a cat"]})
    assert prompted[0].startswith("a cat")


@pytest.mark.skipif(BACKEND == "torch", reason="jit_compile on TF and JAX")
def test_fit_with_jit_compile():
    lm = _lm()
    lm.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    data = {"encoder_text": SOURCES * 4, "decoder_text": TARGETS * 4}
    history = lm.fit(data, batch_size=4, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("sampler", ["greedy", "beam", "length_penalty_beam"])
def test_generate_compiled_equals_eager(sampler):
    lm = _lm()
    lm.compile(sampler=sampler, jit_compile=BACKEND != "torch")
    compiled = lm.generate(SOURCES)
    if BACKEND != "torch":  # compiled (PyTorch wraps it in no_grad only)
        assert lm.generate_function is not lm.generate_step
    eager = _lm()
    eager.compile(sampler=sampler, run_eagerly=True)
    assert eager.generate(SOURCES) == compiled


def test_stop_token_masks_the_rest():
    lm = SynthesizerSeq2SeqLM(_backbone())
    inputs = _inputs()
    free = np.array(lm.generate(inputs, stop_token_ids=None)[
        "decoder_token_ids"])
    stop = int(free[0, 1])
    out = lm.generate(inputs, stop_token_ids=(stop,))
    ids, mask = np.array(out["decoder_token_ids"]), np.array(
        out["decoder_padding_mask"])
    assert mask[0].tolist() == [True, True] + [False] * (LENGTH - 2)
    np.testing.assert_array_equal(ids[mask], free[mask])


def test_keras_and_preset_round_trips(tmp_path):
    lm = _lm(("random+vanilla", "vanilla"))
    path = os.path.join(tmp_path, "lm.keras")
    lm.save(path)
    restored = keras.saving.load_model(path)
    inputs = _inputs()
    np.testing.assert_allclose(_np(restored(inputs)), _np(lm(inputs)),
                               atol=1e-6)
    expected = lm.generate(SOURCES)
    assert restored.generate(SOURCES) == expected
    preset = os.path.join(tmp_path, "preset")
    lm.save_to_preset(preset)
    for cls in (SynthesizerSeq2SeqLM, keras_hub.models.Seq2SeqLM):
        from_preset = cls.from_preset(preset)
        assert isinstance(from_preset, SynthesizerSeq2SeqLM)
        assert from_preset.generate(SOURCES) == expected
    backbone = keras_hub.models.Backbone.from_preset(preset)
    assert isinstance(backbone, SynthesizerSeq2SeqBackbone)


def test_preset_of_another_class_is_an_error(tmp_path):
    from keras_synth.models import SynthesizerCausalLM
    from keras_synth.models import SynthesizerCausalLMBackbone

    preset = os.path.join(tmp_path, "causal")
    SynthesizerCausalLMBackbone(
        vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=8, max_sequence_length=4,
    ).save_to_preset(preset)
    with pytest.raises(ValueError, match="SynthesizerCausalLMBackbone"):
        SynthesizerSeq2SeqLM.from_preset(preset)
    assert SynthesizerCausalLM.backbone_cls.__name__ in str(
        keras_hub.models.Backbone.from_preset(preset).__class__)


def test_max_length_beyond_backbone_is_an_error():
    lm = _lm()
    with pytest.raises(ValueError, match="max_sequence_length=10"):
        lm.generate(SOURCES, max_length=LENGTH + 2)
    inputs = {k: np.concatenate([v, v], axis=1) for k, v in _inputs().items()}
    lm.preprocessor = None
    with pytest.raises(ValueError, match="encoder_token_ids.shape"):
        lm.generate(inputs, stop_token_ids=None)


def test_config_round_trip():
    backbone = _backbone(("factorized_random", "random"),
                         synthesizer_options={"rank": 2},
                         normalize_first=True)
    config = backbone.get_config()
    assert config["cross_attention_synthesizer"] == "random"
    restored = SynthesizerSeq2SeqBackbone.from_config(config)
    assert restored.count_params() == backbone.count_params()
    restored.set_weights(backbone.get_weights())
    inputs = _inputs()
    np.testing.assert_allclose(
        _np(restored(inputs)["decoder_sequence_output"]),
        _np(backbone(inputs)["decoder_sequence_output"]), atol=1e-6,
    )


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
@pytest.mark.parametrize("sampler", ["greedy", "length_penalty_beam"])
def test_saved_model_generates_what_generate_does(sampler, tmp_path):
    import tensorflow as tf

    from keras_synth.models import export_generator

    lm = _lm()
    lm.compile(sampler=sampler)
    path = export_generator(lm, os.path.join(tmp_path, "export"))
    reloaded = tf.saved_model.load(path)
    generated = reloaded.generate(tf.constant(SOURCES))["generated"]
    assert [s.decode() for s in generated.numpy()] == lm.generate(SOURCES)
    lm.preprocessor = None
    with pytest.raises(ValueError, match="no preprocessor"):
        export_generator(lm, os.path.join(tmp_path, "x"))
