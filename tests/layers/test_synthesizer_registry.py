"""The synthesizer registry: user-defined variants everywhere a built-in one
goes, `synthesizer_options` routing and errors, release 0.1's keyword
arguments, and the MultiHeadAttention-style override points."""

import os
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from keras_synth.layers import Synthesizer
from keras_synth.layers import SynthesizerAttention
from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from keras_synth.layers import get_synthesizer
from keras_synth.layers import register_synthesizer
from keras_synth.layers import registered_synthesizers
from keras_synth.layers import VARIANTS
from keras_synth.models import SynthesizerBackbone
from tests.layers import numpy_reference as ref
from tests.layers.layer_harness import randomize

H, D, K, L = 2, 8, 4, 10
WINDOW = 2


# --------------------------------------------- a user-defined synthesizer
# As docs/synthesizers.md writes one, outside the package.


@register_synthesizer("relative", override=True)
class RelativeSynthesizer(Synthesizer):
    """Logits learned per relative offset: `L_h[t, s] = w_h[clip(s - t)]`."""

    batch_dependent = False  # (H, T, S) logits, shared by the batch
    needs_max_length = False  # any length
    defaults = {"window": 4}

    @classmethod
    def resolve_options(cls, options, max_length):
        resolved = super().resolve_options(options, max_length)
        window = resolved["window"]
        if not isinstance(window, int) or window < 1:
            raise ValueError("Option `window` of 'relative' must be a "
                             f"positive int. Received: window={window!r}")
        return resolved

    def build(self, query_shape, key_shape):
        width = 2 * self.options["window"] + 1
        self.offsets = self.add_logit_weight(
            "offsets", (self.num_heads, width), "random_normal")

    def logits(self, query, key, query_start, query_length, key_length,
               scale=None):
        window = self.options["window"]
        rows = ops.arange(query_length) + query_start
        offsets = ops.arange(key_length)[None, :] - rows[:, None]
        index = ops.clip(offsets, -window, window) + window  # (T, S)
        return ops.take(self.offsets, index, axis=1)  # (H, T, S)


def _relative_logits(layer, weights, query, key, start, T, S):
    (synth,) = [s for s in layer.synthesizers if s.variant == "relative"]
    window = synth.options["window"]
    w = weights["relative/offsets"]
    rows = np.arange(T)[:, None] + start
    index = np.clip(np.arange(S)[None, :] - rows, -window, window) + window
    return w[:, index]


ref.EXTRA_VARIANT_LOGITS["relative"] = _relative_logits


def _inputs(batch=3, length=L, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, length, D)).astype("float32")
    mask = np.arange(length)[None] < np.array([[length], [length - 3],
                                               [2]])[:batch]
    return x, mask


def _layer(synthesizer, **kwargs):
    kwargs.setdefault("synthesizer_options", {"window": WINDOW})
    layer = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                 synthesizer=synthesizer, **kwargs)
    return layer


def test_user_defined_is_registered():
    assert "relative" in registered_synthesizers()
    assert get_synthesizer("relative") is RelativeSynthesizer
    assert RelativeSynthesizer.variant == "relative"
    assert registered_synthesizers()[:len(VARIANTS)] == VARIANTS


@pytest.mark.parametrize("synthesizer", [
    "relative", "relative+vanilla", "random+relative", "dense+relative",
    "factorized_random+relative+vanilla"])
@pytest.mark.parametrize("masked", [False, True])
def test_user_defined_matches_numpy(synthesizer, masked):
    layer = _layer(synthesizer)
    x, mask = _inputs()
    value_mask = mask if masked else None
    layer(x, x, value_mask=value_mask)
    randomize(layer, seed=1)
    out, scores = layer(x, x, value_mask=value_mask, use_causal_mask=masked,
                        return_attention_scores=True)
    expected, probs = ref.reference_attention(
        layer, x, x, value_mask=value_mask, use_causal_mask=masked)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ops.convert_to_numpy(scores), probs,
                               rtol=1e-4, atol=1e-5)
    # Without scores, the batch-shared fast path runs where it can: equal.
    fast = layer(x, x, value_mask=value_mask, use_causal_mask=masked)
    np.testing.assert_allclose(ops.convert_to_numpy(fast), expected,
                               rtol=1e-4, atol=1e-4)


def test_user_defined_option_errors_name_the_option():
    with pytest.raises(ValueError, match=r"`window` of 'relative'.*window=0"):
        _layer("relative", synthesizer_options={"window": 0})
    with pytest.raises(ValueError, match=r"Unknown option 'windw'.*"
                       r"Did you mean 'window'"):
        _layer("relative", synthesizer_options={"windw": 3})


def test_user_defined_cached_decoding_equals_full_pass():
    layer = _layer("relative+vanilla", value_dim=K)
    x, _ = _inputs(batch=2)
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.initial_cache(2, L)
    steps = []
    for i in range(L):
        step = x[:, i:i + 1]
        out, cache = layer(step, step, cache=cache, cache_update_index=i,
                           use_causal_mask=True)
        steps.append(ops.convert_to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full,
                               rtol=1e-5, atol=1e-5)


def test_user_defined_keras_file_round_trip(tmp_path):
    inputs = keras.Input((L, D))
    layer = _layer("relative+random", synthesizer_options={"window": 3})
    model = keras.Model(inputs, layer(inputs, inputs))
    randomize(layer, seed=2)
    x, _ = _inputs()
    path = os.path.join(tmp_path, "relative.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    (attention,) = [la for la in restored.layers
                    if isinstance(la, SynthesizerAttention)]
    assert attention.synthesizer_options["relative"] == {"window": 3}
    np.testing.assert_allclose(ops.convert_to_numpy(restored(x)),
                               ops.convert_to_numpy(model(x)), atol=1e-6)


def test_user_defined_in_blocks_and_backbone_preset(tmp_path):
    x, mask = _inputs(batch=2)
    encoder = SynthesizerEncoder(intermediate_dim=16, num_heads=H,
                                 synthesizer="relative+vanilla",
                                 max_length=L,
                                 synthesizer_options={"window": 3})
    encoder(x, padding_mask=mask[:2])
    attention = encoder._self_attention_layer
    assert attention.synthesizer_options["relative"] == {"window": 3}
    clone = SynthesizerEncoder.from_config(encoder.get_config())
    assert clone.get_config() == encoder.get_config()

    decoder = SynthesizerDecoder(intermediate_dim=16, num_heads=H,
                                 synthesizer="relative", max_length=L,
                                 synthesizer_options={"window": 1})
    y = decoder(x, use_causal_mask=True)
    assert tuple(y.shape) == x.shape
    assert decoder._self_attention_layer.synthesizer_options == {
        "relative": {"window": 1}}

    backbone = SynthesizerBackbone(
        vocabulary_size=20, num_layers=1, num_heads=H, hidden_dim=D,
        intermediate_dim=16, synthesizer="relative+random",
        max_sequence_length=L, synthesizer_options={"window": 3})
    tokens = {"token_ids": np.ones((2, L), "int32"),
              "segment_ids": np.zeros((2, L), "int32"),
              "padding_mask": mask[:2].astype("int32")}
    expected = ops.convert_to_numpy(backbone(tokens)["sequence_output"])
    preset = os.path.join(tmp_path, "preset")
    backbone.save_to_preset(preset)
    restored = SynthesizerBackbone.from_preset(preset)
    np.testing.assert_allclose(
        ops.convert_to_numpy(restored(tokens)["sequence_output"]), expected,
        atol=1e-5)


# ----------------------------------------------------- options and errors


def test_flat_options_go_to_every_owner_and_per_variant_ones_win():
    layer = SynthesizerAttention(
        num_heads=H, key_dim=K, max_length=L,
        synthesizer="random+factorized_random+factorized_dense",
        synthesizer_options={"initializer": "zeros", "rank": 3,
                             "factorized_dense": {"sizes": (2, 5)},
                             "random": {"initializer": "ones"}})
    options = layer.synthesizer_options
    assert options["factorized_random"]["rank"] == 3
    assert options["factorized_dense"]["sizes"] == (2, 5)
    assert isinstance(options["random"]["initializer"],
                      keras.initializers.Ones)
    assert isinstance(options["factorized_random"]["initializer"],
                      keras.initializers.Zeros)
    x, _ = _inputs()
    layer(x, x)
    (random, factorized, dense) = layer.synthesizers
    np.testing.assert_array_equal(ops.convert_to_numpy(random.kernel), 1.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(factorized.left), 0.0)
    assert tuple(factorized.left.shape) == (H, L, 3)
    assert tuple(dense.kernels[0].shape) == (H, K, 2)


def test_options_of_variants_not_in_use_are_ignored():
    options = {"factorized_random": {"rank": 3}, "dense": {}}
    for synthesizer in VARIANTS:
        layer = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                     synthesizer=synthesizer,
                                     synthesizer_options=options)
        assert set(layer.synthesizer_options) == {synthesizer}
    assert layer.synthesizer_options == {"vanilla": {}}


def test_defaults_are_resolved_and_in_the_config():
    layer = SynthesizerAttention(num_heads=H, key_dim=K, max_length=10,
                                 synthesizer="factorized_dense+factorized_random")
    assert layer.synthesizer_options["factorized_dense"]["sizes"] == (4, 3)
    assert layer.synthesizer_options["factorized_random"]["rank"] == 8
    config = layer.get_config()
    assert config["synthesizer_options"]["factorized_dense"]["sizes"] == [4, 3]
    clone = SynthesizerAttention.from_config(config)
    assert clone.get_config() == config


@pytest.mark.parametrize("options, message", [
    ({"rnk": 4}, r"Unknown option 'rnk'.*Did you mean 'rank'"),
    ({"sizes": (2, 2)}, r"no component of synthesizer='factorized_random'"),
    ({"factorized_random": 4}, r"Options of variant 'factorized_random'"
     r".*must be a dict"),
    ({"rank": 0}, r"`rank` of 'factorized_random'.*rank=0"),
    ({"initializer": "nope"}, r"option `initializer`.*initializer='nope'"),
    ("rank=4", r"invalid value for argument `synthesizer_options`"),
])
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                             synthesizer="factorized_random",
                             synthesizer_options=options)


def test_registration_errors():
    with pytest.raises(ValueError, match=r"already registered"):
        register_synthesizer("dense")(RelativeSynthesizer)
    with pytest.raises(ValueError, match=r"invalid synthesizer name.*'a\+b'"):
        register_synthesizer("a+b")(RelativeSynthesizer)
    with pytest.raises(TypeError, match=r"subclasses of"):
        register_synthesizer("thing")(object)
    with pytest.raises(ValueError, match=r"Unknown synthesizer 'relatve'.*"
                       r"Did you mean 'relative'"):
        get_synthesizer("relatve")
    with pytest.raises(ValueError, match=r"register_synthesizer first"):
        SynthesizerAttention(num_heads=H, key_dim=K, synthesizer="unheard")


# ------------------------------------------------ release 0.1's arguments


LEGACY = [
    ("factorized_random", {"factorized_rank": 3}, {"rank": 3}),
    ("factorized_dense", {"factorized_dense_sizes": (2, 5)},
     {"sizes": (2, 5)}),
    ("random", {"random_initializer": "ones"}, {"initializer": "ones"}),
]


@pytest.mark.parametrize("synthesizer, old, new", LEGACY)
def test_legacy_arguments_warn_and_equal_the_new_form(synthesizer, old, new):
    with pytest.warns(DeprecationWarning, match=r"synthesizer_options"):
        legacy = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                      synthesizer=synthesizer, name="a",
                                      **old)
    current = SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                                   synthesizer=synthesizer, name="a",
                                   synthesizer_options=new)
    assert legacy.get_config() == current.get_config()
    with pytest.warns(DeprecationWarning):
        block = SynthesizerEncoder(intermediate_dim=8, num_heads=H,
                                   synthesizer=synthesizer, max_length=L,
                                   **old)
    x, _ = _inputs()
    block(x)
    assert block._self_attention_layer.get_config()["synthesizer_options"] \
        == current.get_config()["synthesizer_options"]


def test_legacy_and_new_form_of_one_option_is_an_error():
    with pytest.raises(ValueError, match=r"'rank' of 'factorized_random' is "
                       r"given twice"):
        SynthesizerAttention(num_heads=H, key_dim=K, max_length=L,
                             synthesizer="factorized_random",
                             factorized_rank=3,
                             synthesizer_options={"rank": 4})


def test_release_0_1_config_loads_without_warning():
    config = SynthesizerAttention(
        num_heads=H, key_dim=K, max_length=L, synthesizer="factorized_random",
        synthesizer_options={"rank": 3}).get_config()
    del config["synthesizer_options"]
    config.update(factorized_rank=3, factorized_dense_sizes=None,
                  random_initializer={"module": "keras.initializers",
                                      "class_name": "RandomNormal",
                                      "config": {"mean": 0.0, "stddev": 0.5,
                                                 "seed": None},
                                      "registered_name": None})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        layer = SynthesizerAttention.from_config(config)
    options = layer.synthesizer_options["factorized_random"]
    assert options["rank"] == 3
    assert options["initializer"].stddev == 0.5


# ------------------------------------------------------- override points


class TemperatureAttention(SynthesizerAttention):
    """A subclass that changes the softmax: `softmax(logits / 2)`."""

    def _masked_softmax(self, logits, attention_mask=None):
        return super()._masked_softmax(logits / 2.0, attention_mask)


class ShiftedLogitsAttention(SynthesizerAttention):
    """A subclass that changes the logits: `+ 1` on the diagonal."""

    def _compute_logits(self, query, keys, query_start, query_length,
                        key_length):
        logits = super()._compute_logits(query, keys, query_start,
                                         query_length, key_length)
        return logits + ops.eye(query_length, key_length)


@pytest.mark.parametrize("synthesizer", ["random", "factorized_random",
                                         "random+vanilla", "dense"])
def test_overridden_softmax_takes_the_general_path(synthesizer):
    layer = TemperatureAttention(num_heads=H, key_dim=K, max_length=L,
                                 synthesizer=synthesizer)
    x, mask = _inputs()
    layer(x, x, value_mask=mask)
    randomize(layer, seed=3)
    assert not layer._uses_fast_paths()
    weights = ref.layer_weights(layer)
    logits = ref.reference_logits(layer, x, x, weights=weights) / 2.0
    probs = ref.masked_softmax(logits, mask[:, None, None, :])
    values = np.einsum("bsd,dnh->bsnh", x, weights["value/kernel"]) + (
        weights["value/bias"])
    heads = np.einsum("bnts,bsnh->btnh", probs, values)
    expected = np.einsum("btnh,nhd->btd", heads,
                         weights["attention_output/kernel"]) + (
        weights["attention_output/bias"])
    # Key padding with batch-independent logits: the batch-shared path
    # would run (and ignore the override) if the layer did not notice.
    out = layer(x, x, value_mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected,
                               rtol=1e-4, atol=1e-4)
    plain = SynthesizerAttention.from_config(layer.get_config())
    plain(x, x)
    plain.set_weights(layer.get_weights())
    assert plain._uses_fast_paths()
    assert not np.allclose(ops.convert_to_numpy(plain(x, x, value_mask=mask)),
                           expected, atol=1e-3)


def test_overridden_logits_are_used_everywhere():
    layer = ShiftedLogitsAttention(num_heads=H, key_dim=K, max_length=L,
                                   synthesizer="random")
    x, mask = _inputs()
    layer(x, x)
    randomize(layer, seed=4)
    _, scores = layer(x, x, value_mask=mask, return_attention_scores=True)
    logits = ref.reference_logits(layer, x, x) + np.eye(L)
    expected = ref.masked_softmax(logits, mask[:, None, None, :])
    np.testing.assert_allclose(ops.convert_to_numpy(scores), expected,
                               rtol=1e-4, atol=1e-5)


def test_overridden_compute_attention_replaces_it():
    class Uniform(SynthesizerAttention):
        def _compute_attention(self, query, keys, values, **kwargs):
            mean = ops.mean(values, axis=1, keepdims=True)
            return ops.broadcast_to(
                mean, (values.shape[0], query.shape[1]) + values.shape[2:]
            ), None

    layer = Uniform(num_heads=H, key_dim=K, max_length=L, synthesizer="dense")
    x, _ = _inputs()
    out = ops.convert_to_numpy(layer(x, x))
    weights = ref.layer_weights(layer)
    values = np.einsum("bsd,dnh->bsnh", x, weights["value/kernel"]) + (
        weights["value/bias"])
    expected = np.einsum("bnh,nhd->bd", values.mean(1),
                         weights["attention_output/kernel"]) + (
        weights["attention_output/bias"])
    np.testing.assert_allclose(out, np.repeat(expected[:, None], L, 1),
                               rtol=1e-5, atol=1e-5)
