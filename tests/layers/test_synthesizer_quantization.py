"""int8 quantization of the synthesizers' logit weights (random, fixed
random, factorized random): values against NumPy, the error bound, saving."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import SynthesizerAttention

# `quantize` drops Keras variables: a full garbage collection each
# (tests/conftest.py `frozen_heap`).
pytestmark = pytest.mark.usefixtures("frozen_heap")

LENGTH = 16
# Variant -> the attributes that become int8.
QUANTIZED = {
    "random": ("kernel",),
    "fixed_random": ("kernel",),
    "factorized_random": ("left", "right"),
}
# |attention output (int8) - float| <= OUTPUT_TOLERANCE * max |float output|
# for the synthesizer alone (the projections stay float here): the logits
# move by at most max|row| / 254 (one half step of the row's scale).
OUTPUT_TOLERANCE = 2e-2


def to_numpy(x):
    return ops.convert_to_numpy(x)


def make_model(synthesizer):
    keras.utils.set_random_seed(0)
    layer = SynthesizerAttention(num_heads=2, key_dim=4,
                                 synthesizer=synthesizer, max_length=LENGTH)
    query = keras.Input((None, 8))
    return keras.Model(query, layer(query, query)), layer


def inputs(length=12):
    return np.random.default_rng(1).standard_normal(
        (2, length, 8)).astype("float32")


def synthesizer_of(layer, variant):
    return next(s for s in layer.synthesizers if s.variant == variant)


def numpy_int8_rows(w):
    """Per-row absmax int8 of `w (..., n)` and its dequantized value."""
    w = w.astype("float64")
    scale = 127.0 / (np.abs(w).max(-1, keepdims=True) + keras.config.epsilon())
    q = np.clip(np.round(w * scale), -127, 127)
    return q, q / scale


@pytest.mark.parametrize("variant", sorted(QUANTIZED))
def test_int8_weights_equal_numpy_quantization_and_logits_follow_query_start(
        variant):
    # One synthesizer quantized alone serves both checks (each built and
    # quantized the same fresh model).
    _, layer = make_model(variant)
    synthesizer = synthesizer_of(layer, variant)
    floats = {a: to_numpy(getattr(synthesizer, a)) for a in QUANTIZED[variant]}
    synthesizer.quantize("int8")
    assert synthesizer.quantization_mode == "int8"
    for attribute, w in floats.items():
        q, dequantized = numpy_int8_rows(w)
        weight = getattr(synthesizer, attribute)
        assert keras.backend.standardize_dtype(weight.dtype) == "int8"
        assert tuple(getattr(synthesizer, f"{attribute}_scale").shape) == (
            w.shape[:-1])
        np.testing.assert_array_equal(to_numpy(weight), q)
        read = to_numpy(synthesizer.float_weight(attribute))
        np.testing.assert_allclose(read, dequantized, rtol=1e-6, atol=1e-6)
        # Half a step of each row's scale at most.
        bound = np.abs(w).max(-1, keepdims=True) / 254 + 1e-6
        assert np.all(np.abs(read - w) <= bound)
    # Decoding reads rows from `query_start`: the dequantized block there.
    full = to_numpy(synthesizer.logits(None, None, 0, LENGTH, LENGTH))
    rows = to_numpy(synthesizer.logits(None, None, 5, 3, 9))
    np.testing.assert_allclose(rows, full[:, 5:8, :9], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant", sorted(QUANTIZED) + ["random+vanilla"])
def test_outputs_within_tolerance_of_float(variant):
    model, _ = make_model(variant)
    x = inputs()
    expected = to_numpy(model(x))
    model.quantize("int8")
    actual = to_numpy(model(x))
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    assert 0 < error <= OUTPUT_TOLERANCE, error


def quantized_round_trip(model, x, path):
    """Quantizes `model`, saves it to `path`, reloads it; checks equal
    outputs and returns the reloaded model."""
    model.quantize("int8")
    expected = to_numpy(model(x))
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    return restored


@pytest.mark.parametrize("variant", sorted(QUANTIZED))
def test_quantized_model_keras_round_trip(variant, tmp_path):
    model, _ = make_model(variant)
    restored = quantized_round_trip(model, inputs(),
                                    str(tmp_path / "int8.keras"))
    synthesizer = synthesizer_of(restored.layers[-1], variant)
    for attribute in QUANTIZED[variant]:
        assert keras.backend.standardize_dtype(
            getattr(synthesizer, attribute).dtype) == "int8"


@pytest.mark.parametrize("variant", sorted(QUANTIZED))
def test_lora_on_quantized_synthesizer(variant, tmp_path):
    # QLoRA: int8 frozen logits plus a float update; saved merged (random,
    # re-quantized) or with its adapters (factorized random).
    model, layer = make_model(variant)
    synthesizer = synthesizer_of(layer, variant)
    synthesizer.quantize("int8")
    x = inputs()
    before = to_numpy(model(x))
    synthesizer.enable_lora(2)
    np.testing.assert_allclose(to_numpy(model(x)), before, atol=1e-6)
    rng = np.random.default_rng(2)
    synthesizer.lora_kernel_b.assign(
        0.3 * rng.standard_normal(synthesizer.lora_kernel_b.shape))
    expected = to_numpy(model(x))
    path = str(tmp_path / "qlora.keras")
    model.save(path)
    restored = to_numpy(keras.saving.load_model(path)(x))
    scale = np.abs(expected).max()
    assert np.abs(restored - expected).max() <= OUTPUT_TOLERANCE * scale


def test_other_modes_leave_synthesizers_float():
    _, layer = make_model("random")
    with pytest.raises(NotImplementedError, match="mode='int4'"):
        layer.synthesizers[0].quantize("int4")
    assert keras.backend.standardize_dtype(
        layer.synthesizers[0].kernel.dtype) == "float32"


def test_quantized_blocks_keras_round_trip(tmp_path):
    # The layers' configs carry their quantized sublayers' policies (a
    # DTypePolicyMap), so that the reloaded sublayers are int8 too.
    from keras_synth.layers import SynthesizerDecoder
    from keras_synth.layers import SynthesizerEncoder

    keras.utils.set_random_seed(0)
    x = keras.Input((None, 8))
    y = SynthesizerEncoder(16, 2, synthesizer="random",
                           max_length=LENGTH)(x)
    y = SynthesizerDecoder(16, 2, synthesizer="factorized_random",
                           max_length=LENGTH)(y, y)
    restored = quantized_round_trip(keras.Model(x, y), inputs(),
                                    str(tmp_path / "blocks.keras"))
    assert sorted(w.path.split("/")[-1] for w in restored.weights
                  if keras.backend.standardize_dtype(w.dtype) == "int8") == [
        "kernel"] * 12 + ["left", "logits", "right"]
