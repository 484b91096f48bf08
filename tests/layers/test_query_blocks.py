"""Query-blocked batch-shared attention against the unblocked paths.

`query_blocks.blocked_shared_attention` attends a few query rows at a time
(rematerialised in the backward pass) so that long inputs never hold
`H x T x S` logits. On small shapes, with blocks of 3 rows over 7 queries
(the last block shorter), it must give the outputs and gradients of the
unblocked batch-shared path and of the general path, masks included, eager
and compiled; and the layer must take it past `2 * QUERY_BLOCK` rows.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers.attention import paths as attention_paths
from keras_synth.layers.attention import query_blocks
from tests.backend_utils import gradients
from tests.layers.layer_harness import BATCH_INDEPENDENT
from tests.layers.layer_harness import assert_same_outputs_and_gradients
from tests.layers.layer_harness import compiled
from tests.layers.test_fast_paths import MASKS
from tests.layers.test_fast_paths import attend

BATCH, LENGTH, WIDTH, HEADS, KEY_DIM = 3, 7, 12, 2, 4
BLOCK = 3
VARIANTS = BATCH_INDEPENDENT + ("random+factorized_random",)


def make_layer(variant, max_length=9):
    keras.utils.set_random_seed(1)
    layer = SynthesizerAttention(
        num_heads=HEADS, key_dim=KEY_DIM, synthesizer=variant,
        max_length=max_length,
    )
    x = inputs()
    layer(x, x)
    return layer


def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((BATCH, LENGTH, WIDTH)).astype("float32")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 3 rows (7 > 2 * 3 queries: the layer blocks), counting the
    blocked calls."""
    calls = []
    blocked = query_blocks.blocked_shared_attention

    def counting(*args, **kwargs):
        calls.append(kwargs["block"])
        return blocked(*args, **kwargs)

    monkeypatch.setattr(query_blocks, "QUERY_BLOCK", BLOCK)
    monkeypatch.setattr(query_blocks, "blocked_shared_attention", counting)
    return calls


def test_block_size_rule():
    assert query_blocks.query_block_size(2048, 1024) is None
    assert query_blocks.query_block_size(2049, 1024) == 1024
    assert query_blocks.query_block_size(16384) == query_blocks.QUERY_BLOCK
    assert query_blocks.query_block_size(None, 4) is None  # unknown length
    with pytest.raises(ValueError, match="block=0"):
        query_blocks.query_block_size(10, 0)


def test_blocks_need_batch_independent_logits():
    layer = make_layer("dense")
    with pytest.raises(ValueError, match="batch-independent"):
        query_blocks.blocked_shared_attention(
            layer.synthesizers, None, 0, LENGTH, layer.value_dense(inputs()),
            block=BLOCK,
        )


# Every kind of mask once: none, key padding with causal, query rows with
# key padding, an example with every key masked.
BLOCK_MASKS = ("none", "padding+causal", "query+padding", "all_masked_example")


@pytest.mark.parametrize("mask", BLOCK_MASKS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_blocked_equals_unblocked(variant, mask, small_blocks):
    layer = make_layer(variant)
    x = inputs()
    y = ops.convert_to_tensor(
        np.random.default_rng(3).standard_normal(x.shape).astype("float32"))
    kwargs = MASKS[mask]
    variables = layer.trainable_variables

    def run(fast_paths):
        def loss():
            out = attend(layer, x, fast_paths, **kwargs)
            return ops.sum(ops.square(out - y))

        out = ops.convert_to_numpy(attend(layer, x, fast_paths, **kwargs))
        return out, gradients(loss, variables)

    blocked_out, blocked_grads = run(True)
    assert small_blocks and set(small_blocks) == {BLOCK}
    del small_blocks[:]
    out, grads = run(False)  # the general path: B x H x T x S
    assert not small_blocks
    assert_same_outputs_and_gradients(variables, blocked_out, blocked_grads,
                                      out, grads)


@pytest.mark.parametrize("variant", VARIANTS)
def test_blocked_equals_one_piece_shared_path(variant, monkeypatch):
    """Blocked against the unblocked batch-shared path (both fast)."""
    layer = make_layer(variant)
    x = inputs()
    kwargs = MASKS["padding+causal"]
    one_piece = ops.convert_to_numpy(layer(x, x, **kwargs))
    monkeypatch.setattr(query_blocks, "QUERY_BLOCK", BLOCK)
    blocked = ops.convert_to_numpy(layer(x, x, **kwargs))
    np.testing.assert_allclose(blocked, one_piece, rtol=1e-5, atol=1e-6)


def test_decoding_offset_blocks(small_blocks):
    """Query rows that start past 0 (`query_start_index`) slice the logits
    at their positions in every block."""
    layer = make_layer("random+factorized_random", max_length=12)
    x = inputs()
    blocked = ops.convert_to_numpy(
        layer(x, x, query_start_index=4, use_causal_mask=True)
    )
    assert small_blocks
    general = ops.convert_to_numpy(
        attention_paths.attend(
            layer.synthesizers, layer.mixture_weights(), x, None,
            layer.value_dense(x), query_start=4, use_causal_mask=True,
            fast_paths=False,
        )[0]
    )
    np.testing.assert_allclose(
        blocked, ops.convert_to_numpy(layer.output_dense(general)),
        rtol=1e-5, atol=1e-5,
    )


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="PyTorch runs the layer eagerly; no compiler")
def test_compiled_blocked_equals_general(small_blocks):
    layer = make_layer("factorized_random")
    x = inputs()
    keys = MASKS["padding"]["value_mask"]

    def run(fast_paths):
        fn = compiled(lambda x, keys: attend(
            layer, x, fast_paths, value_mask=keys, use_causal_mask=True))
        return ops.convert_to_numpy(fn(x, keys))

    blocked = run(True)
    assert small_blocks
    np.testing.assert_allclose(blocked, run(False), rtol=1e-5, atol=1e-5)
