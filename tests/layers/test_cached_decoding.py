"""Cached autoregressive decoding: `SynthesizerAttention` and `SynthesizerDecoder`.

For every variant, step-by-step decoding with a cache, inside a compiled loop
(`jax.jit`, `tf.function(jit_compile=True)`; PyTorch runs Keras' loop
eagerly), gives the logits/outputs of the full causal forward pass (1e-5 in
float32). Then a tiny decoder-only language model and a tiny encoder-decoder
model are driven through keras-nlp's samplers.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from keras_synth.layers import VARIANTS as SYNTHESIZER_VARIANTS
import keras_hub
from keras_synth.models.generation_utils import decode_with_caches
from keras_synth.models.generation_utils import (
    initial_cross_attention_caches,
)
from keras_synth.models.generation_utils import (
    initial_self_attention_caches,
)
from tests.layers.decoding_helpers import compiled
from tests.layers.decoding_helpers import decode_step_by_step
from tests.layers.layer_harness import randomize

# Every variant, and mixtures with and without a dot-product part.
VARIANTS = list(SYNTHESIZER_VARIANTS) + [
    "random+vanilla",
    "dense+vanilla",
    "random+dense",
    "factorized_dense+factorized_random",
    "light_conv",
    "dynamic_conv",
    "dynamic_conv+vanilla",
    "light_conv+random",
]
PURE = {"dense", "random", "fixed_random", "factorized_dense",
        "factorized_random", "random+dense",
        "factorized_dense+factorized_random", "light_conv", "dynamic_conv",
        "light_conv+random"}
B, T, D, HEADS, MAX_LEN = 2, 7, 16, 2, 10
TOL = dict(atol=1e-5, rtol=1e-5)


def _np(x):
    return ops.convert_to_numpy(x)


def _attention(variant, key_dim=8):
    layer = SynthesizerAttention(
        num_heads=HEADS, key_dim=key_dim, synthesizer=variant,
        max_length=MAX_LEN,
        synthesizer_options={"factorized_random": {"rank": 3}},
    )
    layer.build((B, T, D), (B, T, D))
    randomize(layer)
    return layer


# ------------------------------------------------------------ attention cache


@pytest.mark.parametrize("variant", VARIANTS)
def test_initial_cache_layout(variant):
    layer = _attention(variant)
    cache = layer.initial_cache(B, MAX_LEN)
    slots = 1 if variant in PURE else 2
    assert tuple(cache.shape) == (B, slots, MAX_LEN, HEADS, 8)
    assert keras.backend.standardize_dtype(cache.dtype) == "float32"
    assert layer.uses_keys == (variant not in PURE)
    assert np.all(_np(cache) == 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_attention_step_by_step_equals_causal_pass(variant):
    layer = _attention(variant)
    x = np.random.default_rng(1).standard_normal((B, T, D)).astype("float32")
    full = _np(layer(x, x, use_causal_mask=True))

    stepped, cache = compiled(
        lambda x: decode_step_by_step(layer, x, MAX_LEN)
    )(x)
    np.testing.assert_allclose(_np(stepped), full, **TOL)
    # The cache holds the projected values at rows 0..T-1, zeros after.
    values = _np(layer.value_dense(x))
    np.testing.assert_allclose(_np(cache)[:, -1, :T], values, **TOL)
    assert np.all(_np(cache)[:, :, T:] == 0)


@pytest.mark.parametrize("variant", ["random", "dense+vanilla"])
def test_attention_seeded_prefix_then_steps(variant):
    """A prompt written at index 0 in one call, then one token per step."""
    layer = _attention(variant)
    x = np.random.default_rng(2).standard_normal((B, T, D)).astype("float32")
    full = _np(layer(x, x, use_causal_mask=True))
    cache = layer.initial_cache(B, MAX_LEN)
    prefix = 4
    y, cache = layer(x[:, :prefix], x[:, :prefix], use_causal_mask=True,
                     cache=cache, cache_update_index=0)
    np.testing.assert_allclose(_np(y), full[:, :prefix], **TOL)
    for t in range(prefix, T):
        y, cache = layer(x[:, t:t + 1], x[:, t:t + 1], use_causal_mask=True,
                         cache=cache, cache_update_index=t)
        np.testing.assert_allclose(_np(y)[:, 0], full[:, t], **TOL)
    # A cache used without an update index: the query at position T - 1.
    y, same = layer(x[:, T - 1:], x[:, T - 1:], use_causal_mask=True,
                    cache=cache, query_start_index=T - 1)
    np.testing.assert_allclose(_np(y)[:, 0], full[:, T - 1], **TOL)
    np.testing.assert_array_equal(_np(same), _np(cache))


def test_cache_with_wrong_layout_is_rejected():
    layer = _attention("random")
    bad = ops.zeros((B, 2, MAX_LEN, HEADS, 8))  # a key/value cache
    with pytest.raises(ValueError, match="cache"):
        layer(np.zeros((B, 1, D)), np.zeros((B, 1, D)), cache=bad,
              cache_update_index=0)


# -------------------------------------------------------------- decoder cache


def _decoder(variant, cross=None, normalize_first=False):
    layer = SynthesizerDecoder(
        intermediate_dim=24, num_heads=HEADS, synthesizer=variant,
        cross_attention_synthesizer=cross or "vanilla", max_length=MAX_LEN,
        synthesizer_options={"factorized_random": {"rank": 3}},
        normalize_first=normalize_first,
    )
    layer.build((B, T, D), (B, 5, D) if cross else None)
    randomize(layer, seed=3)
    return layer


def _decode_block(layer, x, enc=None, enc_mask=None):
    """Step-by-step block outputs with caches, in a compiled loop."""
    self_cache = layer.initial_cache(B, MAX_LEN)
    cross_cache = None
    if enc is not None:
        cross_cache = layer.initial_cross_attention_cache(B, enc.shape[1])

    def decode(x, enc, self_cache, cross_cache):
        outputs = ops.zeros((B, T, D))
        kwargs = {}
        if enc is not None:
            # Step 0 fills the cross-attention cache, later steps reuse it.
            x_0 = x[:, :1]
            y_0, self_cache, cross_cache = layer(
                x_0, enc, encoder_padding_mask=enc_mask,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=0,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=0,
            )
            outputs = ops.slice_update(outputs, (0, 0, 0), y_0)
            start = 1
        else:
            start = 0

        def body(t, state):
            outputs, self_cache, cross_cache = state
            x_t = ops.slice(x, (0, t, 0), (B, 1, D))
            if enc is None:
                y_t, self_cache = layer(
                    x_t, self_attention_cache=self_cache,
                    self_attention_cache_update_index=t, **kwargs,
                )
            else:
                y_t, self_cache, cross_cache = layer(
                    x_t, enc, encoder_padding_mask=enc_mask,
                    self_attention_cache=self_cache,
                    self_attention_cache_update_index=t,
                    cross_attention_cache=cross_cache,
                    cross_attention_cache_update_index=None,
                )
            outputs = ops.slice_update(outputs, (0, t, 0), y_t)
            return outputs, self_cache, cross_cache

        state = (outputs, self_cache, cross_cache if enc is not None else ())
        outputs, _, _ = ops.fori_loop(start, T, body, state)
        return outputs

    if enc is None:
        return compiled(lambda x, c: decode(x, None, c, None))(x, self_cache)
    return compiled(decode)(x, enc, self_cache, cross_cache)


@pytest.mark.parametrize("variant", VARIANTS)
def test_decoder_only_step_by_step_equals_causal_pass(variant):
    layer = _decoder(variant, normalize_first=variant == "random")
    x = np.random.default_rng(4).standard_normal((B, T, D)).astype("float32")
    full = _np(layer(x))
    np.testing.assert_allclose(_np(_decode_block(layer, x)), full, **TOL)


@pytest.mark.parametrize(
    "variant, cross",
    [
        ("dense+vanilla", "vanilla"),
        ("factorized_dense", "random"),
        ("random", "dense"),
        ("vanilla", "factorized_random+vanilla"),
        ("fixed_random", "factorized_dense"),
    ],
)
def test_encoder_decoder_step_by_step_equals_causal_pass(variant, cross):
    layer = _decoder(variant, cross=cross)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((B, T, D)).astype("float32")
    enc = rng.standard_normal((B, 5, D)).astype("float32")
    enc_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    full = _np(layer(x, enc, encoder_padding_mask=enc_mask))
    stepped = _decode_block(layer, x, enc, enc_mask)
    np.testing.assert_allclose(_np(stepped), full, **TOL)


def test_cross_cache_layout_follows_cross_variant():
    pure = _decoder("vanilla", cross="random")
    assert tuple(pure.initial_cross_attention_cache(B, 5).shape) == (
        B, 1, 5, HEADS, 8)
    assert tuple(pure.initial_cache(B, MAX_LEN).shape) == (
        B, 2, MAX_LEN, HEADS, 8)
    decoder_only = _decoder("random")
    assert tuple(decoder_only.initial_cache(B, MAX_LEN).shape) == (
        B, 1, MAX_LEN, HEADS, 8)
    with pytest.raises(ValueError, match="without cross-attention"):
        decoder_only.initial_cross_attention_cache(B, 5)


def test_initial_cache_needs_a_built_decoder():
    layer = SynthesizerDecoder(intermediate_dim=8, num_heads=2,
                               synthesizer="random", max_length=8)
    with pytest.raises(ValueError, match="built"):
        layer.initial_cache(1, 8)


# ------------------------------------------------------------------ samplers

VOCAB, HIDDEN, LENGTH = 13, 16, 10


class TinyLM:
    """Token+position embedding, 2 SynthesizerDecoder blocks, a vocab head.

    With `encoder=True` it is an encoder-decoder: the source goes through
    its own embedding and a SynthesizerEncoder.
    """

    def __init__(self, variant, encoder=False, seed=0):
        keras.utils.set_random_seed(seed)
        self.embedding = keras_hub.layers.TokenAndPositionEmbedding(
            VOCAB, LENGTH, HIDDEN
        )
        self.blocks = [
            SynthesizerDecoder(
                intermediate_dim=32, num_heads=2, synthesizer=variant,
                max_length=LENGTH,
                synthesizer_options={"factorized_random": {"rank": 3}},
            )
            for _ in range(2)
        ]
        self.head = keras.layers.Dense(VOCAB)
        self.encoder = None
        if encoder:
            self.source_embedding = keras_hub.layers.TokenAndPositionEmbedding(
                VOCAB, LENGTH, HIDDEN
            )
            self.encoder = SynthesizerEncoder(
                intermediate_dim=32, num_heads=2, synthesizer=variant,
                max_length=LENGTH,
            )
        # Build with a full pass; larger random weights give clear argmaxes.
        source = np.ones((1, 6), "int32") if encoder else None
        self.logits(np.ones((1, LENGTH), "int32"), source)
        layers = self.blocks + [self.head]
        if encoder:
            layers.append(self.encoder)
        for layer in layers:
            randomize(layer, seed=seed + len(layer.weights))

    def encode(self, source):
        if self.encoder is None:
            return None
        return self.encoder(self.source_embedding(source))

    def logits(self, token_ids, source=None):
        """Full causal forward pass: `(B, L, VOCAB)`."""
        encoded = self.encode(source)
        x = self.embedding(token_ids)
        for block in self.blocks:
            x = block(x, encoded)
        return self.head(x)

    def initial_cache(self, batch_size, source_length):
        self_caches = initial_self_attention_caches(
            self.blocks, batch_size, LENGTH, None
        )
        if self.encoder is None:
            return self_caches
        return self_caches, initial_cross_attention_caches(
            self.blocks, batch_size, source_length, None
        )

    def call_with_cache(self, token_ids, cache, index, encoded=None,
                        fill_cross=False):
        x = self.embedding(token_ids, start_index=index)
        if encoded is None:
            x, cache = decode_with_caches(self.blocks, x, cache, index)
            return self.head(x), cache
        x, self_caches, cross_caches = decode_with_caches(
            self.blocks, x, cache[0], index, encoded, cache[1], fill_cross
        )
        return self.head(x), (self_caches, cross_caches)

    def generate(self, sampler, prompt, prompt_length, source=None,
                 cached=True):
        """keras-nlp's `generate_step`: seed the cache, then sample."""
        encoded = self.encode(source)
        batch_size = prompt.shape[0]
        mask = np.arange(LENGTH)[None, :] < prompt_length
        mask = np.broadcast_to(mask, prompt.shape)

        def run(prompt, encoded):
            cache = None
            if cached:
                cache = self.initial_cache(
                    batch_size, None if source is None else source.shape[1]
                )
                # Seed the caches with one pass over the whole prompt.
                _, cache = self.call_with_cache(
                    prompt, cache, 0, encoded, fill_cross=True
                )

            def next(prompt, cache, index):
                enc, src = encoded, source
                if source is not None and prompt.shape[0] != batch_size:
                    # BeamSampler folds the beams into the batch.
                    beams = prompt.shape[0] // batch_size
                    enc = ops.repeat(encoded, beams, axis=0)
                    src = np.repeat(source, beams, axis=0)
                if cached:
                    # The sampler's batch (beams multiply it).
                    token = ops.slice(
                        prompt, (0, index - 1), (ops.shape(prompt)[0], 1)
                    )
                    logits, cache = self.call_with_cache(
                        token, cache, index - 1, enc
                    )
                    return logits[:, 0], None, cache
                logits = self.logits(prompt, src)
                row = ops.take(logits, index - 1, axis=1)
                return row, None, cache

            return sampler(next=next, prompt=prompt, cache=cache,
                           index=prompt_length, mask=mask)

        if keras.backend.backend() == "jax" and sampler.variables:
            # A seeded sampler updates its seed variable, which jax.jit
            # cannot do; its `lax.while_loop` still compiles the loop.
            return run(prompt, encoded)
        # XLA compatibility of the decoding step is tested above; a plain
        # graph keeps these sampler tests fast on TensorFlow.
        return compiled(run, xla=False)(prompt, encoded)


def _reference_greedy(model, prompt, prompt_length, source=None):
    tokens = np.array(prompt)
    for index in range(prompt_length, LENGTH):
        logits = _np(model.logits(tokens, source))
        tokens[:, index] = np.argmax(logits[:, index - 1], axis=-1)
    return tokens


def _prompt(seed):
    rng = np.random.default_rng(seed)
    prompt = np.zeros((2, LENGTH), "int32")
    prompt[:, :3] = rng.integers(1, VOCAB, size=(2, 3))
    return prompt


@pytest.mark.parametrize(
    "variant, encoder", [("random", False), ("dense+vanilla", True)],
    ids=["lm", "seq2seq"],
)
def test_greedy_sampler_matches_uncached_greedy_decoding(variant, encoder):
    model = TinyLM(variant, encoder=encoder)
    prompt = _prompt(6)
    source = np.random.default_rng(7).integers(1, VOCAB, (2, 6)).astype(
        "int32") if encoder else None
    tokens = model.generate(keras_hub.samplers.GreedySampler(), prompt, 3,
                            source)
    expected = _reference_greedy(model, prompt, 3, source)
    np.testing.assert_array_equal(_np(tokens), expected)
    assert np.all(_np(tokens)[:, :3] == prompt[:, :3])


@pytest.mark.parametrize(
    "make_sampler",
    [
        lambda: keras_hub.samplers.BeamSampler(num_beams=3),
        lambda: keras_hub.samplers.TopKSampler(k=4, seed=11),
    ],
    ids=["beam", "top_k"],
)
@pytest.mark.parametrize("encoder", [False, True], ids=["lm", "seq2seq"])
def test_samplers_with_cache_match_samplers_without(make_sampler, encoder):
    model = TinyLM("random+dense" if encoder else "factorized_random",
                   encoder=encoder, seed=1)
    prompt = _prompt(8)
    source = np.random.default_rng(9).integers(1, VOCAB, (2, 6)).astype(
        "int32") if encoder else None
    with_cache = model.generate(make_sampler(), prompt, 3, source)
    without = model.generate(make_sampler(), prompt, 3, source, cached=False)
    np.testing.assert_array_equal(_np(with_cache), _np(without))
    assert _np(with_cache).shape == (2, LENGTH)
