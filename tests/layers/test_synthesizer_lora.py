"""LoRA of the synthesizers: `enable_lora(rank)` on random, fixed random
(when targeted), factorized random and dense, checked against NumPy."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention

HEADS, KEY_DIM, LENGTH, RANK = 2, 4, 8, 3
# Variant -> (m, n) of the `(H, m, n)` matrix that `A B` updates.
LORA_VARIANTS = {
    "random": (LENGTH, LENGTH),
    "fixed_random": (LENGTH, LENGTH),
    "factorized_random": (LENGTH, LENGTH),
    "dense": (KEY_DIM, LENGTH),
}


def to_numpy(x):
    return ops.convert_to_numpy(x)


def make_layer(synthesizer, **kwargs):
    keras.utils.set_random_seed(0)
    layer = SynthesizerAttention(
        num_heads=HEADS, key_dim=KEY_DIM, synthesizer=synthesizer,
        max_length=LENGTH, **kwargs)
    x = inputs()
    layer(x, x)
    return layer


def inputs(batch=2, length=6, seed=1):
    return np.random.default_rng(seed).standard_normal(
        (batch, length, 8)).astype("float32")


def synthesizer_of(layer, variant):
    return next(s for s in layer.synthesizers if s.variant == variant)


def randomize_adapters(synthesizer, seed=2):
    rng = np.random.default_rng(seed)
    for weight in (synthesizer.lora_kernel_a, synthesizer.lora_kernel_b):
        weight.assign(0.5 * rng.standard_normal(weight.shape))


def reference_logits(synthesizer, start, rows, columns, query):
    """NumPy float64 logits of the LoRA-enabled synthesizer."""
    a = to_numpy(synthesizer.lora_kernel_a).astype("float64")
    b = to_numpy(synthesizer.lora_kernel_b).astype("float64")
    delta = synthesizer.lora_alpha / synthesizer.lora_rank * (a @ b)
    variant = synthesizer.variant
    if variant in ("random", "fixed_random"):
        full = to_numpy(synthesizer.kernel).astype("float64") + delta
        return full[:, start:start + rows, :columns]
    if variant == "factorized_random":
        left = to_numpy(synthesizer.left).astype("float64")
        right = to_numpy(synthesizer.right).astype("float64")
        full = left @ right.transpose(0, 2, 1) + delta
        return full[:, start:start + rows, :columns]
    # dense: relu(x W1 + b1) (W2 + delta) + b2, per head.
    hidden = synthesizer.hidden
    h = np.maximum(np.einsum(
        "btd,dnk->btnk", query.astype("float64"),
        to_numpy(hidden.kernel).astype("float64"))
        + to_numpy(hidden.bias).astype("float64"), 0)
    kernel = to_numpy(synthesizer.kernel).astype("float64") + delta
    return (np.einsum("btnk,nks->bnts", h, kernel[:, :, :columns])
            + to_numpy(synthesizer.bias).astype("float64")[None, :, None,
                                                           :columns])


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
def test_outputs_unchanged_right_after_enable_lora(variant):
    layer = make_layer(f"{variant}+vanilla")
    x = inputs()
    before = to_numpy(layer(x, x))
    synthesizer_of(layer, variant).enable_lora(RANK)
    np.testing.assert_allclose(to_numpy(layer(x, x)), before, atol=1e-6)


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
def test_only_adapters_trainable_and_their_count(variant):
    layer = make_layer(variant)
    synthesizer = synthesizer_of(layer, variant)
    synthesizer.enable_lora(RANK)
    m, n = LORA_VARIANTS[variant]
    names = sorted(w.name for w in synthesizer.trainable_weights)
    expected = ["lora_kernel_a", "lora_kernel_b"]
    count = HEADS * (m + n) * RANK
    if variant == "dense":  # b2 stays trainable, as a Dense layer's bias.
        expected = ["bias"] + expected
        count += HEADS * LENGTH
    assert names == expected
    assert sum(int(np.prod(w.shape)) for w in
               synthesizer.trainable_weights) == count
    assert synthesizer.lora_enabled and synthesizer.lora_rank == RANK


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
@pytest.mark.parametrize("start", [0, 2])
def test_logits_equal_numpy_reference(variant, start):
    # float32 against a float64 NumPy reference (JAX has no float64 by
    # default).
    layer = make_layer(variant)
    synthesizer = synthesizer_of(layer, variant)
    synthesizer.enable_lora(RANK, lora_alpha=6)
    randomize_adapters(synthesizer)
    query = inputs(length=4)
    logits = synthesizer.logits(query, None, start, 4, 5)
    np.testing.assert_allclose(
        to_numpy(logits), reference_logits(synthesizer, start, 4, 5, query),
        rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
def test_fit_changes_only_the_adapters(variant):
    layer = make_layer(variant)
    synthesizer = synthesizer_of(layer, variant)
    synthesizer.enable_lora(RANK)
    frozen = {w.path: to_numpy(w) for w in layer.weights
              if not w.trainable}
    query = keras.Input((6, 8))
    model = keras.Model(query, layer(query, query))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    x = inputs(batch=4)
    y = np.random.default_rng(3).standard_normal((4, 6, 8))
    before = to_numpy(model(x))
    model.fit(x, y, epochs=3, batch_size=4, verbose=0)
    for w in layer.weights:
        if w.path in frozen:
            np.testing.assert_array_equal(to_numpy(w), frozen[w.path],
                                          err_msg=w.path)
    assert np.abs(to_numpy(synthesizer.lora_kernel_b)).max() > 0
    assert np.abs(to_numpy(model(x)) - before).max() > 1e-4


def tuned_model(variant, **lora_kwargs):
    """A model of one layer whose `variant` has LoRA with random adapters."""
    layer = make_layer(variant)
    synthesizer_of(layer, variant).enable_lora(RANK, **lora_kwargs)
    randomize_adapters(synthesizer_of(layer, variant))
    query = keras.Input((6, 8))
    return keras.Model(query, layer(query, query))


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
def test_keras_file_round_trip_of_lora_enabled_layer(variant, tmp_path):
    model = tuned_model(variant, lora_alpha=2 * RANK)
    x = inputs()
    expected = to_numpy(model(x))
    path = str(tmp_path / "lora.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(restored(x)), expected, atol=1e-5)
    reloaded = synthesizer_of(restored.layers[-1], variant)
    # random and dense merge the update into their weight; factorized
    # random cannot (its factors have rank r) and gets its adapters back.
    assert reloaded.lora_enabled == (variant == "factorized_random")


def test_load_into_lora_enabled_layer_zeroes_merged_update(tmp_path):
    model = tuned_model("random")
    x = inputs()
    expected = to_numpy(model(x))
    path = str(tmp_path / "weights.weights.h5")
    model.save_weights(path)
    fresh = make_layer("random")
    synthesizer_of(fresh, "random").enable_lora(RANK)
    query = keras.Input((6, 8))
    fresh_model = keras.Model(query, fresh(query, query))
    fresh_model.load_weights(path)
    np.testing.assert_allclose(to_numpy(fresh_model(x)), expected, atol=1e-5)
    np.testing.assert_array_equal(
        to_numpy(synthesizer_of(fresh, "random").lora_kernel_b), 0)


def test_enable_lora_errors():
    layer = make_layer("random+vanilla")
    random = synthesizer_of(layer, "random")
    with pytest.raises(ValueError, match="rank=0"):
        random.enable_lora(0)
    random.enable_lora(RANK)
    with pytest.raises(ValueError, match="already enabled"):
        random.enable_lora(RANK)
    with pytest.raises(NotImplementedError, match="'vanilla'"):
        synthesizer_of(layer, "vanilla").enable_lora(RANK)
    unbuilt = SynthesizerAttention(num_heads=2, key_dim=4,
                                   synthesizer="random", max_length=8)
    with pytest.raises(ValueError, match="not built"):
        unbuilt.synthesizers[0].enable_lora(RANK)
    constrained = make_layer("dense", kernel_constraint="non_neg")
    with pytest.raises(ValueError, match="kernel constraints"):
        synthesizer_of(constrained, "dense").enable_lora(RANK)
