"""`SynthesizerCausalLM`: fit, cached generate, saving, keras-hub parity."""

import functools
import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_hub
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models import SynthesizerCharTokenizer
from keras_synth.samplers import LengthPenaltyBeamSampler

BACKEND = keras.backend.backend()
VARIANTS = ["vanilla", "random", "dense", "random+vanilla"]
LENGTH = 12
TEXTS = ["ROMEO: who is there?", "JULIET: it is I.", "ROMEO: good night."] * 4


def _np(x):
    return ops.convert_to_numpy(x)


def _backbone(variant="random", vocabulary_size=30, **kwargs):
    keras.utils.set_random_seed(0)
    args = dict(
        vocabulary_size=vocabulary_size, num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=LENGTH,
        synthesizer=variant, dropout=0.0,
    )
    args.update(kwargs)
    backbone = SynthesizerCausalLMBackbone(**args)
    rng = np.random.default_rng(1)
    for weight in backbone.weights:  # large enough to give peaked logits
        weight.assign(0.3 * rng.standard_normal(weight.shape))
    return backbone


@functools.lru_cache(maxsize=None)
def _shared_backbone(variant):
    """`_backbone(variant)` built once per test process for the tests
    that only read it (each wraps it in a task of its own; none trains
    it, changes its weights or its config). Cleared after the module."""
    return _backbone(variant)


@functools.lru_cache(maxsize=None)
def _shared_lm():
    """`_lm("random")` built once per test process for the sampler tests:
    each `compile(sampler=...)`s it first, which sets the sampler and
    drops the compiled generate function (`generate` builds a new one)."""
    return _lm("random")


@pytest.fixture(scope="module", autouse=True)
def _free_shared():
    yield
    _shared_backbone.cache_clear()
    _shared_lm.cache_clear()


def _tokenizer():
    return SynthesizerCharTokenizer(
        SynthesizerCharTokenizer.learn_vocabulary(TEXTS)
    )


def _lm(variant="random", **kwargs):
    tokenizer = _tokenizer()
    preprocessor = SynthesizerCausalLMPreprocessor(
        tokenizer, sequence_length=LENGTH
    )
    backbone = _backbone(variant, tokenizer.vocabulary_size(), **kwargs)
    return SynthesizerCausalLM(backbone, preprocessor)


def _prompts():
    """Right-padded prompts of lengths 1, 3 and 5."""
    ids = np.zeros((3, LENGTH), "int32")
    mask = np.zeros((3, LENGTH), bool)
    for row, n in enumerate((1, 3, 5)):
        ids[row, :n] = [1] + list(range(4, 3 + n))
        mask[row, :n] = True
    return {"token_ids": ids, "padding_mask": mask}


def _argmax_path(lm, inputs, stop=None):
    """Greedy decoding with full (uncached) forward passes, in NumPy."""
    ids = np.array(inputs["token_ids"])
    mask = np.array(inputs["padding_mask"], bool)
    done = np.zeros(len(ids), bool)
    for index in range(mask.sum(-1).min(), LENGTH):
        logits = _np(lm({"token_ids": ids, "padding_mask": np.ones_like(ids)}))
        token = logits[:, index - 1].argmax(-1)
        ids[:, index] = np.where(mask[:, index], ids[:, index], token)
        if stop is not None:
            done |= ~mask[:, index] & (ids[:, index] == stop)
            if done.all():
                break
    return ids


def _uncached_next(lm):
    def next(prompt, cache, index):
        logits = lm(
            {"token_ids": prompt, "padding_mask": ops.ones_like(prompt)}
        )
        return logits[:, index - 1], None, cache

    return next


@pytest.mark.parametrize("variant", VARIANTS)
def test_backbone_shapes_and_cache_layout(variant):
    backbone = _shared_backbone(variant)
    out = backbone(_prompts())
    assert tuple(out.shape) == (3, LENGTH, 16)
    lm = SynthesizerCausalLM(backbone)
    _, cache = lm._build_cache(ops.convert_to_tensor(_prompts()["token_ids"]))
    slots = 2 if "vanilla" in variant else 1  # values only without keys
    assert [tuple(c.shape) for c in cache] == [(3, slots, LENGTH, 2, 8)] * 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_greedy_equals_uncached_argmax_path(variant):
    lm = SynthesizerCausalLM(_shared_backbone(variant))
    lm.compile(sampler="greedy")
    inputs = _prompts()
    out = lm.generate(inputs, stop_token_ids=None)
    np.testing.assert_array_equal(out["token_ids"], _argmax_path(lm, inputs))
    # The prompts are kept.
    mask = inputs["padding_mask"]
    np.testing.assert_array_equal(
        out["token_ids"][mask], inputs["token_ids"][mask]
    )


@pytest.mark.parametrize("variant", ["random", "vanilla"])
def test_cached_beam_equals_uncached_beam(variant):
    # The beam search reorders the caches between steps.
    lm = SynthesizerCausalLM(_shared_backbone(variant))
    sampler = LengthPenaltyBeamSampler(num_beams=3, length_penalty=0.6)
    lm.compile(sampler=sampler)
    inputs = _prompts()
    cached = lm.generate(inputs, stop_token_ids=(2,))
    uncached = sampler(
        _uncached_next(lm),
        ops.convert_to_tensor(inputs["token_ids"]),
        index=1,
        mask=inputs["padding_mask"],
        stop_token_ids=(2,),
    )
    np.testing.assert_array_equal(
        _until_stop(cached["token_ids"], inputs["padding_mask"], 2),
        _until_stop(_np(uncached), inputs["padding_mask"], 2),
    )


def _until_stop(ids, prompt_mask, stop):
    """`ids` with -1 after the first generated `stop` token of each row."""
    ids = np.array(ids)
    for row in range(len(ids)):
        hits = np.flatnonzero((ids[row] == stop) & ~prompt_mask[row])
        if len(hits):
            ids[row, hits[0] + 1:] = -1
    return ids


def test_stop_tokens_end_each_row():
    lm = SynthesizerCausalLM(_shared_backbone("random"))
    inputs = _prompts()
    free = lm.generate(inputs, stop_token_ids=None)["token_ids"]
    stop = int(free[0, 1])  # the first generated token of row 0
    out = lm.generate(inputs, stop_token_ids=(stop,))
    expected = _argmax_path(lm, inputs, stop=stop)
    mask = np.array(out["padding_mask"])
    # Row 0 ends at its first generated token; rows agree with the argmax
    # path up to their stop token, and are masked after it.
    assert mask[0].tolist() == [True, True] + [False] * (LENGTH - 2)
    np.testing.assert_array_equal(
        np.where(mask, out["token_ids"], -1), np.where(mask, expected, -1)
    )
    for row in range(3):
        generated = np.array(out["token_ids"])[row][
            mask[row] & ~inputs["padding_mask"][row]
        ]
        assert (generated[:-1] != stop).all()


@pytest.mark.parametrize(
    "sampler", ["greedy", "top_k", "top_p", "beam", "random",
                "length_penalty_beam"]
)
def test_every_sampler_generates_strings(sampler):
    lm = _shared_lm()
    lm.compile(sampler=sampler)
    out = lm.generate(["ROMEO:", "J"], max_length=LENGTH)
    assert len(out) == 2 and all(isinstance(s, str) for s in out)
    assert out[0].startswith("ROMEO:") and out[1].startswith("J")


def test_sampler_instance_and_bad_name():
    lm = _shared_lm()
    lm.compile(sampler=keras_hub.samplers.TopKSampler(k=2, seed=0))
    assert isinstance(lm.generate("ROMEO:"), str)
    with pytest.raises(ValueError, match="'length_penalty_beam'"):
        lm.compile(sampler="bogus")


def test_fit_loss_falls_and_predict():
    lm = _lm("random")
    lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = lm.fit(TEXTS, batch_size=4, epochs=6, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.85 * losses[0], losses
    logits = lm.predict(TEXTS[:2], verbose=0)
    assert logits.shape == (2, LENGTH, lm.backbone.vocabulary_size)


@pytest.mark.skipif(BACKEND == "torch", reason="jit_compile on TF and JAX")
def test_fit_with_jit_compile():
    lm = _lm("random")
    lm.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    history = lm.fit(TEXTS, batch_size=4, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("variant", ["random", "vanilla"])
def test_generate_compiled_equals_eager(variant):
    # XLA-compiled on TensorFlow and JAX, eager on PyTorch (and with
    # run_eagerly); the same text either way.
    lm = _lm(variant)
    lm.compile(sampler="greedy", jit_compile=BACKEND != "torch")
    compiled = lm.generate(["ROMEO:", "JU", "R"])
    if BACKEND != "torch":  # compiled (PyTorch wraps it in no_grad only)
        assert lm.generate_function is not lm.generate_step
    if BACKEND == "tensorflow":
        assert lm.generate_function._jit_compile
    eager = _lm(variant)
    eager.compile(sampler="greedy", run_eagerly=True)
    assert eager.generate(["ROMEO:", "JU", "R"]) == compiled


def test_keras_round_trip(tmp_path):
    lm = _lm("random")
    path = os.path.join(tmp_path, "lm.keras")
    lm.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, SynthesizerCausalLM)
    inputs = _prompts()
    np.testing.assert_allclose(_np(restored(inputs)), _np(lm(inputs)),
                               atol=1e-6)
    assert restored.generate("ROMEO:") == lm.generate("ROMEO:")


def test_preset_round_trip(tmp_path):
    lm = _lm("random+vanilla")
    preset = os.path.join(tmp_path, "preset")
    lm.save_to_preset(preset)
    for cls in (SynthesizerCausalLM, keras_hub.models.CausalLM):
        restored = cls.from_preset(preset)
        assert isinstance(restored, SynthesizerCausalLM)
        assert restored.generate(["ROMEO:", "JU"]) == lm.generate(
            ["ROMEO:", "JU"]
        )
    backbone = keras_hub.models.Backbone.from_preset(preset)
    np.testing.assert_allclose(
        _np(backbone(_prompts())), _np(lm.backbone(_prompts())), atol=1e-6
    )


def test_preset_errors(tmp_path):
    with pytest.raises((ValueError, FileNotFoundError), match="missing"):
        SynthesizerCausalLM.from_preset(os.path.join(tmp_path, "missing"))


def test_max_length_beyond_backbone_is_an_error():
    lm = _lm("random")
    with pytest.raises(ValueError, match="max_sequence_length=12"):
        lm.generate("ROMEO:", max_length=LENGTH + 1)
    lm.preprocessor.sequence_length = LENGTH + 4
    with pytest.raises(ValueError, match="preprocessor.sequence_length"):
        lm.generate("ROMEO:")


def test_vanilla_equals_gpt2_backbone_and_generate():
    gpt2 = keras_hub.models.GPT2Backbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, dropout=0.0, max_sequence_length=LENGTH,
    )
    ours = _backbone(
        "vanilla", activation=lambda x: keras.activations.gelu(
            x, approximate=True)
    )
    ours.set_weights(gpt2.get_weights())
    for mine, theirs in zip(ours.weights, gpt2.weights):
        assert mine.path.replace("/vanilla", "") == theirs.path
    inputs = _prompts()
    np.testing.assert_allclose(_np(ours(inputs)), _np(gpt2(inputs)),
                               atol=1e-5)
    theirs_lm = keras_hub.models.GPT2CausalLM(gpt2, preprocessor=None)
    theirs_lm.compile(sampler="greedy")
    ours_lm = SynthesizerCausalLM(ours)
    np.testing.assert_array_equal(
        ours_lm.generate(inputs, stop_token_ids=None)["token_ids"],
        theirs_lm.generate(inputs, stop_token_ids=None)["token_ids"],
    )


def test_config_round_trip():
    backbone = _backbone("factorized_random", synthesizer_options={"rank": 2})
    config = backbone.get_config()
    assert config["synthesizer"] == "factorized_random"
    restored = SynthesizerCausalLMBackbone.from_config(config)
    assert restored.count_params() == backbone.count_params()


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
def test_saved_model_generates_what_generate_does(tmp_path):
    import tensorflow as tf

    from keras_synth.models import export_generator

    lm = _lm("random+vanilla")
    prompts = ["ROMEO:", "J", "JULIET: it"]
    path = export_generator(lm, os.path.join(tmp_path, "export"))
    reloaded = tf.saved_model.load(path)
    generated = reloaded.generate(tf.constant(prompts))["generated"]
    assert [s.decode() for s in generated.numpy()] == lm.generate(prompts)
    with pytest.raises(ValueError, match="max_sequence_length=12"):
        export_generator(lm, os.path.join(tmp_path, "x"), max_length=99)


def _stream_lm(variant="random"):
    """A model of a contiguous stream: no start or end tokens anywhere."""
    tokenizer = _tokenizer()
    preprocessor = SynthesizerCausalLMPreprocessor(
        tokenizer, sequence_length=LENGTH, add_start_token=False,
        add_end_token=False,
    )
    backbone = _backbone(variant, tokenizer.vocabulary_size())
    return SynthesizerCausalLM(backbone, preprocessor, sampler="greedy")


def test_generate_preprocess_honours_add_start_token():
    tokenizer = _tokenizer()
    ids = list(_np(tokenizer("RO")))
    for add_start, expected in ((True, [1] + ids), (False, ids)):
        preprocessor = SynthesizerCausalLMPreprocessor(
            tokenizer, sequence_length=6, add_start_token=add_start
        )
        out = preprocessor.generate_preprocess(["RO"])
        n = len(expected)
        assert _np(out["token_ids"])[0].tolist() == expected + [0] * (6 - n)
        assert _np(out["padding_mask"])[0].tolist() == [True] * n + [
            False
        ] * (6 - n)


def test_stream_model_generates_from_the_prompt_itself():
    lm = _stream_lm()
    text = lm.generate("ROMEO", max_length=8)
    assert text.startswith("ROMEO") and len(text) == 8
    # The prompt's own tokens seed the cache: greedy from "ROMEO" equals the
    # argmax continuation of the uncached model fed "ROMEO" alone.
    tokenizer = lm.preprocessor.tokenizer
    ids = list(_np(tokenizer("ROMEO")))
    logits = lm.backbone.token_embedding(
        lm.backbone(
            {
                "token_ids": np.array([ids], "int32"),
                "padding_mask": np.ones((1, len(ids)), bool),
            }
        ),
        reverse=True,
    )
    first = int(np.argmax(_np(logits)[0, -1]))
    assert text[5] == tokenizer.detokenize([first])


def test_empty_prompt_without_start_token_is_an_error():
    lm = _stream_lm()
    with pytest.raises(ValueError, match=r"empty prompt.*index \[1\]"):
        lm.generate(["RO", ""], max_length=6)
    # With a start token an empty prompt is fine: the start token seeds it.
    assert isinstance(_lm().generate("", max_length=6), str)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
def test_saved_model_refuses_empty_prompt_without_start_token(tmp_path):
    import tensorflow as tf

    from keras_synth.models import export_generator

    lm = _stream_lm()
    path = export_generator(lm, os.path.join(tmp_path, "export"))
    reloaded = tf.saved_model.load(path)
    generated = reloaded.generate(tf.constant(["RO"]))["generated"]
    assert [s.decode() for s in generated.numpy()] == lm.generate(["RO"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty prompt"):
        reloaded.generate(tf.constant(["RO", ""]))
