"""`feedforward_chunk_size`: the blocks' feedforward over chunks of tokens.

`token_chunks.map_token_chunks` runs the residual step and the feedforward
sublayer of `SynthesizerEncoder`/`SynthesizerDecoder` a few tokens at a
time, rematerialised. On small shapes (2 x 7 = 14 tokens in chunks of 4:
three chunks and a shorter last one) the block must give the outputs and
gradients (inputs and every weight) of the same block without chunks,
eager, compiled and in `fit`; the argument is checked (dropout refused)
and saved in the config.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from keras_synth.layers.blocks import token_chunks
from tests.backend_utils import gradients
from tests.layers.layer_harness import assert_same_outputs_and_gradients
from tests.layers.layer_harness import compiled

BATCH, LENGTH, WIDTH = 2, 7, 8
CHUNK = 4


def inputs(length=LENGTH, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, length, WIDTH)).astype("float32")


def make_blocks(kind, chunk_size=CHUNK, **kwargs):
    """The block without and with chunks, the same weights."""
    cls = SynthesizerEncoder if kind == "encoder" else SynthesizerDecoder
    blocks = []
    for size in (None, chunk_size):
        keras.utils.set_random_seed(3)
        blocks.append(cls(16, 2, synthesizer="factorized_random",
                          max_length=LENGTH, feedforward_chunk_size=size,
                          **kwargs))
    return blocks


def call(block, kind, x, **kwargs):
    if kind == "cross":
        return block(x, inputs(5, seed=1), **kwargs)
    return block(x, **kwargs)


def build(blocks, kind):
    for block in blocks:
        call(block, kind, inputs())
    blocks[1].set_weights(blocks[0].get_weights())


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_outputs_and_gradients_equal_unchunked(kind, normalize_first):
    blocks = make_blocks("encoder" if kind == "encoder" else "decoder",
                         normalize_first=normalize_first)
    build(blocks, kind)
    x = keras.Variable(inputs(), name="x")
    results = []
    for block in blocks:
        variables = [x] + list(block.trainable_variables)

        def loss():
            y = call(block, kind, x.value)
            return ops.sum(ops.square(y) * ops.arange(WIDTH, dtype="float32"))

        results.append((variables, ops.convert_to_numpy(call(block, kind, x.value)),
                        gradients(loss, variables)))
    (_, reference, reference_grads), (variables, out, grads) = results
    assert_same_outputs_and_gradients(variables, out, grads, reference,
                                      reference_grads)


def test_chunks_run(monkeypatch):
    """The block maps `ceil(14 / 4) - 1 = 3` whole chunks (the 2 last
    tokens are one more call); an unknown or small size runs in one piece."""
    sizes = []
    original = token_chunks.ops.map

    def counting(function, elements):
        sizes.append(tuple(elements[0].shape[:3]))
        return original(function, elements)

    monkeypatch.setattr(token_chunks.ops, "map", counting)
    block = make_blocks("decoder")[1]
    block(inputs())
    assert sizes == [(3, 1, CHUNK)]
    sizes.clear()
    block(inputs(length=2))  # 4 tokens: one chunk
    assert sizes == []


def test_compiled_equals_eager():
    blocks = make_blocks("decoder")
    build(blocks, "decoder")
    fn = compiled(lambda x: blocks[1](x))
    if fn is None:
        pytest.skip("PyTorch runs layers eagerly")
    np.testing.assert_allclose(
        ops.convert_to_numpy(fn(inputs())),
        ops.convert_to_numpy(blocks[0](inputs())), rtol=1e-5, atol=1e-5)


def test_fit_learns():
    """A compiled `fit` through the chunks (and their gradients)."""
    keras.utils.set_random_seed(0)
    block = SynthesizerDecoder(16, 2, synthesizer="factorized_random",
                               max_length=LENGTH, feedforward_chunk_size=CHUNK)
    tokens = keras.Input((LENGTH, WIDTH), batch_size=BATCH)
    model = keras.Model(tokens, keras.layers.Dense(1)(block(tokens)))
    model.compile("adam", "mse")
    y = np.ones((BATCH, LENGTH, 1), "float32")
    history = model.fit(inputs(), y, epochs=5, batch_size=BATCH, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.parametrize("cls", [SynthesizerEncoder, SynthesizerDecoder])
def test_dropout_refused(cls):
    with pytest.raises(ValueError, match="Received: dropout=0.1"):
        cls(16, 2, dropout=0.1, feedforward_chunk_size=CHUNK)


def test_cached_decoding_unchanged():
    """Chunks of one token (a decoding step's two tokens are two chunks):
    the cached steps reproduce the full causal pass."""
    block = make_blocks("decoder", chunk_size=1)[1]
    x = inputs()
    full = ops.convert_to_numpy(block(x))
    cache = block.initial_cache(BATCH, LENGTH)
    steps = []
    for t in range(LENGTH):
        y, cache = block(x[:, t:t + 1], self_attention_cache=cache,
                         self_attention_cache_update_index=t)
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("cls", [SynthesizerEncoder, SynthesizerDecoder])
def test_config_round_trip(cls):
    block = cls(16, 2, synthesizer="factorized_random", max_length=LENGTH,
                feedforward_chunk_size=CHUNK)
    config = block.get_config()
    assert config["feedforward_chunk_size"] == CHUNK
    assert cls.from_config(config).feedforward_chunk_size == CHUNK
    assert cls(16, 2, synthesizer="random", max_length=LENGTH).get_config()[
        "feedforward_chunk_size"] is None


@pytest.mark.parametrize("cls", [SynthesizerEncoder, SynthesizerDecoder])
@pytest.mark.parametrize("bad", [0, -4, 2.5, "8", True])
def test_bad_chunk_size(cls, bad):
    with pytest.raises(ValueError, match=f"feedforward_chunk_size={bad!r}"):
        cls(16, 2, feedforward_chunk_size=bad)
