"""`SynthesizerAttention` as a drop-in for `keras.layers.MultiHeadAttention`.

Side by side with Keras's own layer: the mask shapes MHA accepts, the shape
errors it raises, `compute_output_shape`, the arguments a synthesizer cannot
honour, and current Keras's `use_gate` and `sliding_window` (docs/design.md,
"A drop-in for MultiHeadAttention").
"""

import inspect

import keras
import numpy as np
import pytest

from keras_synth.layers import SynthesizerAttention
from keras_synth.layers.attention import general as general_attention
from tests.layers.layer_harness import ALL_VARIANTS
from tests.layers.layer_harness import BATCH_INDEPENDENT
from tests.layers.layer_harness import randomize
from tests.layers.layer_harness import to_numpy

B, T, S, D, H, K, L = 2, 5, 6, 12, 3, 4, 8
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(7)


def _inputs(seed=0, length_q=T, length_s=S):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, length_q, D)).astype("float32"),
            rng.standard_normal((B, length_s, D)).astype("float32"))


def _masks(seed=1):
    rng = np.random.default_rng(seed)
    batch = rng.random((B, T, S)) < 0.7
    batch[..., 0] = True  # every row keeps a key
    per_head = rng.random((B, H, T, S)) < 0.7
    per_head[..., 0] = True
    return batch, per_head


def _pair(use_gate=False, sliding_window=None):
    """An MHA and a vanilla SynthesizerAttention with the same weights."""
    q, v = _inputs()
    mha_kwargs = dict(use_gate=use_gate, sliding_window=sliding_window)
    mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K, **mha_kwargs)
    mha(q, v)
    randomize(mha, seed=3)
    ours = SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="vanilla",
                                **mha_kwargs)
    ours(q, v)
    theirs = {w.path.split("/", 1)[1]: w for w in mha.weights}
    renamed = {"vanilla/query": "query", "vanilla/key": "key"}
    for w in ours.weights:
        name = w.path.split("/", 1)[1]
        for mine, keras_name in renamed.items():
            name = name.replace(mine, keras_name)
        w.assign(theirs.pop(name).value)
    assert not theirs, sorted(theirs)  # every MHA weight has its match
    return mha, ours


def _layer(synthesizer, **kwargs):
    layer = SynthesizerAttention(num_heads=H, key_dim=K,
                                 synthesizer=synthesizer, max_length=L,
                                 **kwargs)
    layer(*_inputs())
    randomize(layer, seed=4)
    return layer


# ------------------------------------------------------------ mask shapes


@pytest.mark.parametrize("shape", ["T,S", "1,T,S", "B,T,S", "B,1,S",
                                   "B,H,T,S", "B,1,T,S"])
def test_attention_mask_shapes_match_multi_head_attention(shape):
    mha, ours = _pair()
    q, v = _inputs()
    batch, per_head = _masks()
    mask = {
        "T,S": batch[0], "1,T,S": batch[:1], "B,T,S": batch,
        "B,1,S": batch[:, :1], "B,H,T,S": per_head,
        "B,1,T,S": per_head[:, :1],
    }[shape]
    np.testing.assert_allclose(
        to_numpy(ours(q, v, attention_mask=mask)),
        to_numpy(mha(q, v, attention_mask=mask)), **TOL,
    )


@pytest.mark.parametrize("synthesizer", ALL_VARIANTS)
def test_attention_mask_shapes_agree_for_every_variant(synthesizer):
    """`(T, S)` and `(B, H, T, S)` masks give the results of the `(B, T, S)`
    mask they equal; a per-head mask masks each head on its own."""
    layer = _layer(synthesizer)
    q, v = _inputs()
    batch, per_head = _masks()
    shared = np.broadcast_to(batch[0], (B, T, S))
    expected, expected_scores = layer(q, v, attention_mask=shared,
                                      return_attention_scores=True)
    expected = to_numpy(expected)
    np.testing.assert_allclose(
        to_numpy(layer(q, v, attention_mask=batch[0])), expected, **TOL)
    heads = np.broadcast_to(shared[:, None], (B, H, T, S))
    np.testing.assert_allclose(
        to_numpy(layer(q, v, attention_mask=heads)), expected, **TOL)
    _, scores = layer(q, v, attention_mask=per_head,
                      return_attention_scores=True)
    scores = to_numpy(scores)
    assert not scores[~per_head].any()  # masked keys get exactly 0
    # Rows sum to 1; with a window (the convolutions) a row whose keys in
    # the window are all masked gets zeros.
    allowed = per_head
    for synthesizer in layer.synthesizers:
        window = synthesizer.window(0, T, S)
        if window is not None:
            allowed = allowed & keras.ops.convert_to_numpy(window)
    np.testing.assert_allclose(scores.sum(-1), allowed.any(-1), rtol=1e-5)
    # Head h with the mask of head h alone equals the per-head result.
    for h in range(H):
        _, head_scores = layer(q, v, attention_mask=per_head[:, h],
                               return_attention_scores=True)
        np.testing.assert_allclose(to_numpy(head_scores)[:, h],
                                   scores[:, h], **TOL)
    del expected_scores


@pytest.mark.parametrize("synthesizer", BATCH_INDEPENDENT)
@pytest.mark.parametrize("shape", ["B,1,S", "T,S", "1,T,S"])
def test_factorable_attention_masks_take_the_shared_path(
        synthesizer, shape, monkeypatch):
    """A key padding mask `(B, 1, S)` and batch-independent masks keep the
    `H x T x S` path, with the general path's values."""
    layer = _layer(synthesizer)
    q, v = _inputs(length_s=T)
    batch, _ = _masks()
    batch = batch[..., :T]
    keys = np.arange(T)[None] < np.array([[T], [2]])
    mask = {"B,1,S": keys[:, None], "T,S": batch[0],
            "1,T,S": batch[:1]}[shape]
    # Scores force the general path: the reference for the same mask.
    expected = to_numpy(layer(q, v, attention_mask=mask,
                              return_attention_scores=True)[0])

    def forbidden(*args, **kwargs):
        raise AssertionError("general path used")

    monkeypatch.setattr(general_attention, "attend", forbidden)
    actual = to_numpy(layer(q, v, attention_mask=mask, use_causal_mask=False))
    np.testing.assert_allclose(actual, expected, **TOL)


def test_docstring_names_the_fast_mask_shapes():
    doc = inspect.getdoc(SynthesizerAttention)
    for shape in ("`(B, 1, S)`", "`(T, S)`", "`(B, H, T, S)`"):
        assert shape in doc, shape


# ---------------------------------------------------------- shape errors


@pytest.mark.parametrize("built", [False, True], ids=["at_build", "after"])
@pytest.mark.parametrize("synthesizer", ["random", "vanilla"])
def test_key_and_value_lengths_must_be_equal(synthesizer, built):
    q, v = _inputs()
    k = np.ones((B, S + 1, D), "float32")
    mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K)
    ours = SynthesizerAttention(num_heads=H, key_dim=K,
                                synthesizer=synthesizer, max_length=L)
    if built:
        mha(q, v)
        ours(q, v)
    message = r"All dimensions of `value` and `key`, except the last one, must be equal"
    if not built:  # MHA checks at build only
        with pytest.raises(ValueError, match=message):
            mha(q, v, key=k)
    with pytest.raises(ValueError, match=message + r".*\(2, 6, 12\).*\(2, 7, 12\)"):
        ours(q, v, key=k)


def test_batch_sizes_must_be_equal():
    q, _ = _inputs()
    v = np.ones((B + 1, S, D), "float32")
    mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K)
    with pytest.raises(Exception):
        mha(q, v)
    ours = SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="random",
                                max_length=L)
    with pytest.raises(ValueError, match=r"batch dimensions of `query`, `value` and `key` must be equal"):
        ours(q, v)


@pytest.mark.parametrize("output_shape", [None, 7, (2, 3)])
def test_compute_output_shape_matches_multi_head_attention(output_shape):
    mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K,
                                          output_shape=output_shape)
    ours = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                output_shape=output_shape)
    for shapes in [((B, T, D), (B, S, D)), ((None, T, D), (None, S, 4)),
                   ((B, T, D), (B, S, D), (B, S, 9))]:
        assert ours.compute_output_shape(*shapes) == (
            mha.compute_output_shape(*shapes))
    q, v = _inputs()
    assert tuple(ours(q, v).shape) == tuple(mha(q, v).shape)
    bad = ((B, T, D), (B, S, D), (B, S + 1, D))
    for layer in (mha, ours):
        with pytest.raises(ValueError, match="must be equal"):
            layer.compute_output_shape(*bad)


@pytest.mark.parametrize("output_shape", [object(), "abc", (2, "a"), (0,)])
def test_invalid_output_shape_raises(output_shape):
    with pytest.raises(ValueError, match=r"argument `output_shape`.*output_shape="):
        SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                             output_shape=output_shape)
    if isinstance(output_shape, object) and not isinstance(
            output_shape, (str, tuple)):
        with pytest.raises(ValueError, match="output_shape"):
            keras.layers.MultiHeadAttention(num_heads=H, key_dim=K,
                                            output_shape=output_shape)


# --------------------------------------------------- arguments of MHA


@pytest.mark.parametrize("axes", [None, 1, (1,), -2, [1]])
def test_attention_axes_over_the_sequence_are_accepted(axes):
    mha, ours = _pair()
    q, v = _inputs()
    layer = SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="vanilla",
                                 attention_axes=axes)
    assert layer.attention_axes == (1,)
    layer(q, v)
    for source, target in zip(ours.weights, layer.weights):
        target.assign(source.value)
    np.testing.assert_allclose(to_numpy(layer(q, v)), to_numpy(mha(q, v)),
                               **TOL)


@pytest.mark.parametrize("axes", [(1, 2), 2, (0,), "x"])
def test_other_attention_axes_raise(axes):
    with pytest.raises(ValueError, match=r"argument `attention_axes`.*attention_axes="):
        SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="vanilla",
                             attention_axes=axes)


def test_flash_attention_raises_without_a_dot_product_part():
    # Variants with `vanilla` accept it: tests/layers/test_fused_attention.py.
    with pytest.raises(ValueError, match=r"argument `flash_attention`.*flash_attention=True"):
        SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="dense",
                             max_length=8, flash_attention=True)
    SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="dense",
                         max_length=8, flash_attention=False)


@pytest.mark.parametrize("window", [0, -1, 1.5, "2"])
def test_invalid_sliding_window_raises(window):
    with pytest.raises(ValueError, match=r"`sliding_window`.*sliding_window="):
        SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                             sliding_window=window)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 2, 4])
def test_sliding_window_matches_multi_head_attention(window, causal):
    mha, ours = _pair(sliding_window=window)
    q, _ = _inputs()
    np.testing.assert_allclose(
        to_numpy(ours(q, q, use_causal_mask=causal)),
        to_numpy(mha(q, q, use_causal_mask=causal)), **TOL,
    )


@pytest.mark.parametrize("synthesizer", ALL_VARIANTS)
def test_sliding_window_is_a_band_mask_for_every_variant(synthesizer):
    window = 2
    layer = _layer(synthesizer, sliding_window=window)
    plain = SynthesizerAttention.from_config(
        dict(layer.get_config(), sliding_window=None))
    q, _ = _inputs()
    plain(q, q)
    for source, target in zip(layer.weights, plain.weights):
        target.assign(source.value)
    band = np.abs(np.arange(T)[:, None] - np.arange(T)[None]) < window
    for causal in (False, True):
        expected = np.logical_and(band, np.tril(np.ones((T, T), bool))) \
            if causal else band
        actual, scores = layer(q, q, use_causal_mask=causal,
                               return_attention_scores=True)
        assert not to_numpy(scores)[:, :, ~expected].any()
        np.testing.assert_allclose(
            to_numpy(actual),
            to_numpy(plain(q, q, attention_mask=expected)), **TOL)
        np.testing.assert_allclose(
            to_numpy(layer(q, q, use_causal_mask=causal)), to_numpy(actual),
            **TOL)


def test_use_gate_matches_multi_head_attention():
    mha, ours = _pair(use_gate=True)
    assert ours.gate_dense is not None
    q, v = _inputs()
    batch, _ = _masks()
    for kwargs in ({}, {"attention_mask": batch}, {"use_causal_mask": True}):
        if kwargs.get("use_causal_mask"):
            v = q
        np.testing.assert_allclose(to_numpy(ours(q, v, **kwargs)),
                                   to_numpy(mha(q, v, **kwargs)), **TOL)


@pytest.mark.parametrize("synthesizer", ALL_VARIANTS)
def test_use_gate_gates_every_variant(synthesizer):
    """`y = W_O (sigmoid(q W_g + b_g) * attention) + b_O`, per head."""
    layer = _layer(synthesizer, use_gate=True)
    q, v = _inputs()
    output, scores = layer(q, v, return_attention_scores=True)
    values = to_numpy(layer.value_dense(v))
    attention = np.einsum("bnts,bsnh->btnh", to_numpy(scores), values)
    gate = 1.0 / (1.0 + np.exp(-to_numpy(
        np.einsum("btd,dnh->btnh", q, to_numpy(layer.gate_dense.kernel))
        + to_numpy(layer.gate_dense.bias))))
    expected = np.einsum("btnh,nhd->btd", attention * gate,
                         to_numpy(layer.output_dense.kernel))
    expected = expected + to_numpy(layer.output_dense.bias)
    np.testing.assert_allclose(to_numpy(output), expected, rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(to_numpy(layer(q, v)), expected, rtol=1e-4,
                               atol=1e-5)
    assert any(w.path.endswith("gate/kernel") for w in layer.weights)
    assert layer.get_config()["use_gate"] is True
