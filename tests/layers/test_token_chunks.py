"""`feedforward_chunk_size`: the blocks' feedforward over chunks of tokens.

`token_chunks.map_token_chunks` runs the residual step and the feedforward
sublayer of `SynthesizerEncoder`/`SynthesizerDecoder` a few tokens at a
time, rematerialised. On small shapes (2 x 7 = 14 tokens in chunks of 4:
three chunks and a shorter last one) the block must give the outputs and
gradients (inputs and every weight) of the same block without chunks,
eager, compiled and in `fit`. With dropout, each chunk draws masks of its
own that the backward pass draws again (the gradient is the forward
pass's), and the masks change from call to call. The argument is checked
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


def test_fit_learns_with_dropout():
    """A compiled `fit` through the chunks, dropout in them."""
    keras.utils.set_random_seed(0)
    block = SynthesizerDecoder(16, 2, synthesizer="factorized_random",
                               max_length=LENGTH, dropout=0.2,
                               feedforward_chunk_size=CHUNK)
    tokens = keras.Input((LENGTH, WIDTH), batch_size=BATCH)
    model = keras.Model(tokens, keras.layers.Dense(1)(block(tokens)))
    model.compile("adam", "mse")
    y = np.ones((BATCH, LENGTH, 1), "float32")
    before = model.evaluate(inputs(), y, verbose=0)
    history = model.fit(inputs(), y, epochs=10, batch_size=BATCH, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert model.evaluate(inputs(), y, verbose=0) < before


def dropout_block():
    keras.utils.set_random_seed(5)
    block = SynthesizerDecoder(16, 2, synthesizer="factorized_random",
                               max_length=LENGTH, dropout=0.5,
                               feedforward_chunk_size=CHUNK)
    block(inputs())
    # Every dropout's seed state (the attention's, the residual steps').
    states = [v for v in block.non_trainable_variables
              if "seed_generator" in v.path]
    assert len(states) >= 3
    saved = [ops.convert_to_numpy(v.value) for v in states]

    def reset():
        for state, value in zip(states, saved):
            state.assign(value)
        # PyTorch's dropout of an unseeded layer draws from its global
        # generator (the checkpoint restores it for the recomputation).
        keras.utils.set_random_seed(7)

    return block, reset


def test_dropout_masks_per_chunk_and_call():
    block, reset = dropout_block()
    x = inputs()
    reset()
    first = ops.convert_to_numpy(block(x, training=True))
    second = ops.convert_to_numpy(block(x, training=True))
    reset()
    again = ops.convert_to_numpy(block(x, training=True))
    inference = ops.convert_to_numpy(block(x, training=False))
    np.testing.assert_array_equal(first, again)  # the state sets the masks
    assert not np.allclose(first, second)  # and it advances per call
    assert not np.allclose(first, inference)


def test_each_chunk_draws_its_own_mask():
    layer = keras.layers.Dropout(0.5, seed=1)
    ones = np.ones((2, 8, 16), "float32")
    out = token_chunks.map_token_chunks(
        lambda t: layer(t, training=True), 4, ones,
        seed_generators=[layer.seed_generator])
    chunks = ops.convert_to_numpy(out).reshape(4, 4 * 16)
    assert set(np.unique(chunks)) == {0.0, 2.0}
    assert len({c.tobytes() for c in chunks}) == 4


def test_dropout_gradient_is_the_forward_passes():
    """The recomputed chunks draw the forward pass's masks: the gradient
    agrees with finite differences of the function the forward computes
    (each evaluation from the same seed state)."""
    block, reset = dropout_block()
    x = keras.Variable(inputs(), name="x")
    weights = ops.convert_to_tensor(
        np.random.default_rng(2).standard_normal((BATCH, LENGTH, WIDTH)),
        "float32")

    def loss():
        reset()
        return ops.sum(block(x.value, training=True) * weights)

    [grad] = gradients(loss, [x])
    direction = np.random.default_rng(3).standard_normal(x.shape).astype(
        "float32")
    base = ops.convert_to_numpy(x.value)
    values = []
    for sign in (1, -1):
        x.assign(base + sign * 1e-2 * direction)
        values.append(float(ops.convert_to_numpy(loss())))
    x.assign(base)
    numeric = (values[0] - values[1]) / 2e-2
    analytic = float(np.sum(grad * direction))
    np.testing.assert_allclose(analytic, numeric, rtol=2e-2)


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


def test_unknown_batch_size_chunks():
    """A graph traced for any batch size (TensorFlow's `fit`, a
    `tf.function` with a `None` batch) still runs the chunks: a loop of as
    many as the run's tokens fill, then the rest (maybe none)."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("shapes are static when JAX traces and PyTorch runs")
    import tensorflow as tf

    blocks = make_blocks("decoder")
    build(blocks, "decoder")
    traced = tf.function(
        lambda x: blocks[1](x),
        input_signature=[tf.TensorSpec((None, LENGTH, WIDTH), "float32")])
    for batch in (1, 2, 4):  # 7, 14, 28 tokens: rests of 3, 2, 0
        x = np.concatenate([inputs()] * 2)[:batch]
        np.testing.assert_allclose(
            traced(x).numpy(), ops.convert_to_numpy(blocks[0](x)),
            rtol=1e-5, atol=1e-5)
    graph = traced.get_concrete_function().graph
    assert any(op.type == "While" for op in graph.get_operations())


def test_fit_with_unknown_batch_size():
    """`fit` of a model whose input has no batch size: chunks and their
    gradients on every backend (a `None` batch dimension on TensorFlow)."""
    keras.utils.set_random_seed(0)
    block = SynthesizerDecoder(16, 2, synthesizer="factorized_random",
                               max_length=LENGTH, feedforward_chunk_size=CHUNK)
    tokens = keras.Input((LENGTH, WIDTH))
    model = keras.Model(tokens, keras.layers.Dense(1)(block(tokens)))
    model.compile("adam", "mse")
    y = np.ones((3, LENGTH, 1), "float32")
    x = np.concatenate([inputs(), inputs(seed=1)])[:3]
    before = model.evaluate(x, y, batch_size=2, verbose=0)
    model.fit(x, y, epochs=10, batch_size=2, verbose=0)  # batches of 2, 1
    assert model.evaluate(x, y, batch_size=2, verbose=0) < before
