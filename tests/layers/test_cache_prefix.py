"""Causal decoding reads only the cache rows up to the current position.

`attention_cache.read_prefix` gives a causal decoding step the first `n`
cache rows: exactly `end` rows where the position has a value (eager), else
the smallest multiple of `CACHE_BLOCK` rows at or above it (a switch over
the blocks under a compiler). The tests check which rows each step reads
and that decoding with small blocks (3 rows, the last block shorter) gives
the full causal pass, compiled and eager, for every kind of variant.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers.attention import cache as attention_cache
from keras_synth.layers.attention import paths as attention_paths
from tests.layers.decoding_helpers import compiled
from tests.layers.decoding_helpers import decode_step_by_step

B, T, D, HEADS, MAX_LEN, BLOCK = 2, 8, 16, 2, 10, 3
VARIANTS = ["random", "factorized_random", "dense", "factorized_dense",
            "vanilla", "random+vanilla", "dense+vanilla"]


@pytest.fixture
def rows_read(monkeypatch):
    """Blocks of 3 cache rows; records the key length of every attention."""
    lengths = []
    attend = attention_paths.attend

    def recording(synthesizers, weights, query, keys, values, **kwargs):
        lengths.append(values.shape[1])
        return attend(synthesizers, weights, query, keys, values, **kwargs)

    monkeypatch.setattr(attention_cache, "CACHE_BLOCK", BLOCK)
    monkeypatch.setattr(attention_paths, "attend", recording)
    return lengths


def layer_for(variant):
    keras.utils.set_random_seed(0)
    layer = SynthesizerAttention(
        num_heads=HEADS, key_dim=8, synthesizer=variant, max_length=MAX_LEN,
        synthesizer_options={"factorized_random": {"rank": 3}},
    )
    layer.build((B, T, D), (B, T, D))
    rng = np.random.default_rng(0)
    for weight in layer.weights:
        weight.assign(0.5 * rng.standard_normal(weight.shape))
    return layer


def test_known_end_reads_exactly_its_rows():
    seen = []

    def attend(n):
        seen.append(n)
        return ops.ones(()) * n

    for end in (1, 4, 10):
        assert float(attention_cache.read_prefix(end, 10, attend, 3)) == end
    end = ops.convert_to_tensor(5)  # an eager tensor has a value too
    assert float(attention_cache.read_prefix(end, 10, attend, 3)) == 5
    assert seen == [1, 4, 10, 5]


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="PyTorch runs eagerly: every end is known")
def test_traced_end_reads_whole_blocks_up_to_its_block():
    seen = set()

    def attend(n):
        seen.add(n)
        return ops.ones(()) * n

    read = compiled(lambda end: attention_cache.read_prefix(end, 10, attend, 3))
    for end, rows in ((1, 3), (3, 3), (4, 6), (9, 9), (10, 10)):
        assert float(read(ops.convert_to_tensor(end))) == rows
    assert seen == {3, 6, 9, 10}  # one branch per block, the last one short
    # One block: no switch.
    single = compiled(lambda end: attention_cache.read_prefix(end, 3, attend, 3))
    assert float(single(ops.convert_to_tensor(2))) == 3


@pytest.mark.parametrize("variant", VARIANTS)
def test_compiled_decoding_with_blocks_equals_causal_pass(variant, rows_read):
    layer = layer_for(variant)
    x = np.random.default_rng(1).standard_normal((B, T, D)).astype("float32")
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    assert rows_read == [T]
    del rows_read[:]

    stepped = ops.convert_to_numpy(
        compiled(lambda x: decode_step_by_step(layer, x, MAX_LEN)[0])(x)
    )
    np.testing.assert_allclose(stepped, full, atol=1e-5, rtol=1e-5)
    if keras.backend.backend() == "torch":
        assert rows_read == list(range(1, T + 1))  # eager: exactly t + 1
    else:
        assert set(rows_read) == {3, 6, 9, 10}  # traced: every block once


@pytest.mark.parametrize("variant", ["random", "dense+vanilla"])
def test_eager_steps_read_rows_up_to_their_position(variant, rows_read):
    layer = layer_for(variant)
    x = np.random.default_rng(2).standard_normal((B, T, D)).astype("float32")
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    del rows_read[:]
    cache = layer.initial_cache(B, MAX_LEN)
    prompt = 3
    y, cache = layer(x[:, :prompt], x[:, :prompt], use_causal_mask=True,
                     cache=cache, cache_update_index=0)
    np.testing.assert_allclose(ops.convert_to_numpy(y), full[:, :prompt],
                               atol=1e-5, rtol=1e-5)
    for t in range(prompt, T):
        y, cache = layer(x[:, t:t + 1], x[:, t:t + 1], use_causal_mask=True,
                         cache=cache, cache_update_index=t)
        np.testing.assert_allclose(ops.convert_to_numpy(y)[:, 0], full[:, t],
                                   atol=1e-5, rtol=1e-5)
    assert rows_read == [prompt] + list(range(prompt + 1, T + 1))


def test_without_causal_mask_the_whole_cache_is_read(rows_read):
    layer = layer_for("random")
    x = np.random.default_rng(3).standard_normal((B, 1, D)).astype("float32")
    cache = layer.initial_cache(B, MAX_LEN)
    layer(x, x, cache=cache, cache_update_index=2)
    assert rows_read == [MAX_LEN]
