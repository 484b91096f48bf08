import json
import os

import keras
import numpy as np
import pytest

from keras_synth.models import SynthesizerMaskedLM
from keras_synth.models import SynthesizerMaskedLMPreprocessor
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from tests.models.model_utils import TEXTS
from tests.models.model_utils import VOCAB
from tests.models.model_utils import make_backbone
from tests.models.model_utils import to_numpy

SPECIALS = (0, 1, 2)  # [PAD], [CLS], [SEP]
MASK_ID = VOCAB.index("[MASK]")


def make_masked_lm(sequence_length=16, **kwargs):
    preprocessor = SynthesizerMaskedLMPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=sequence_length)
    backbone = make_backbone("random+vanilla", sequence_length, **kwargs)
    return SynthesizerMaskedLM(backbone, preprocessor=preprocessor)


def fixed_inputs(batch=3, length=12, selections=4, seed=0):
    """Backbone inputs plus mask positions, labels and 0/1 weights."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, len(VOCAB), (batch, length)).astype("int32")
    token_ids[:, 0] = 1
    x = {
        "token_ids": token_ids,
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
        "mask_positions": rng.integers(1, length, (batch, selections)).astype(
            "int32"),
    }
    y = rng.integers(5, len(VOCAB), (batch, selections)).astype("int32")
    weights = np.ones((batch, selections), "float32")
    weights[:, -1] = 0.0
    weights[0, 1] = 0.0
    return x, y, weights


def perturb(model, seed=0):
    """Random values for every weight (head bias and norms too), so that a
    freshly initialized model cannot pass for a loaded one."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.2, weight.shape).astype("float32"))


# --- the mask generator ---------------------------------------------------

# A vocabulary of 200 words, so that a random replacement rarely equals the
# original token or [MASK] by chance (1/205 of the random ones).
WORDS = [f"w{i}" for i in range(200)]
BIG_VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"] + WORDS


def masking_counts(x, sample_weight, originals):
    """Selected/selectable counts and the selected tokens' replacements."""
    token_ids = to_numpy(x["token_ids"])
    positions = to_numpy(x["mask_positions"])
    weights = to_numpy(sample_weight)
    selected = rows_selected = 0
    masked = kept = randomized = 0
    for row in range(len(token_ids)):
        picked = positions[row][weights[row] > 0]
        assert len(set(picked.tolist())) == len(picked)  # no repeats
        for position in picked:
            original = originals[row][position]
            assert original not in SPECIALS, (row, position)
            value = token_ids[row][position]
            if value == MASK_ID:
                masked += 1
            elif value == original:
                kept += 1
            else:
                randomized += 1
        # Unselected tokens are untouched.
        unselected = np.setdiff1d(np.arange(len(token_ids[row])), picked)
        np.testing.assert_array_equal(token_ids[row][unselected],
                                      originals[row][unselected])
        selected += len(picked)
        rows_selected += len(picked)
    return selected, masked, kept, randomized


@pytest.mark.parametrize("path", ["eager", "tf_data"])
def test_mask_generator_rates(path):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 61, 400)
    texts = [" ".join(rng.choice(WORDS, n)) for n in lengths]
    tokenizer = SynthesizerTokenizer(BIG_VOCAB)
    preprocessor = SynthesizerMaskedLMPreprocessor(
        tokenizer, sequence_length=64, mask_selection_length=64)
    # The packed ids before masking: [CLS] words [SEP] [PAD]...
    originals = np.zeros((len(texts), 64), "int64")
    for row, text in enumerate(texts):
        ids = [1] + [BIG_VOCAB.index(w) for w in text.split()] + [2]
        originals[row, :len(ids)] = ids
    if path == "eager":  # keras-hub's Python path (Bernoulli selections)
        x, _, sample_weight = preprocessor(texts)
    else:  # tf.data, as `fit` maps it: the TensorFlow path
        ds = tf.data.Dataset.from_tensor_slices(texts).batch(100).map(
            preprocessor)
        parts = list(ds.as_numpy_iterator())
        x = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
        sample_weight = np.concatenate([p[2] for p in parts])
    np.testing.assert_array_equal(
        to_numpy(x["padding_mask"]).astype(bool), originals != 0)
    np.testing.assert_array_equal(to_numpy(x["segment_ids"]), 0)
    selectable = int(lengths.sum())
    selected, masked, kept, randomized = masking_counts(
        x, sample_weight, originals)
    if path == "tf_data":  # exactly ceil(rate * n) per example
        np.testing.assert_array_equal(
            to_numpy(sample_weight).sum(1), np.ceil(0.15 * lengths))
    # Binomial standard deviations: 0.0023 for the selection rate over
    # ~24,000 tokens, <= 0.007 for the shares of ~3,600 selected ones.
    assert abs(selected / selectable - 0.15) < 0.012, selected / selectable
    assert abs(masked / selected - 0.8) < 0.03, masked / selected
    assert abs(randomized / selected - 0.1) < 0.025, randomized / selected
    assert abs(kept / selected - 0.1) < 0.025, kept / selected


def test_preprocessor_labels_and_weights_and_truncation():
    preprocessor = SynthesizerMaskedLMPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=8,
        mask_selection_rate=1.0, mask_selection_length=6,
        mask_token_rate=1.0, random_token_rate=0.0)
    text = "the cast is tired and boring ."  # 7 tokens: cut to 6
    x, y, sample_weight = preprocessor([text])
    ids = [VOCAB.index(w) for w in text.split()]
    # Every selectable token selected and masked, [CLS]/[SEP] kept.
    np.testing.assert_array_equal(to_numpy(x["token_ids"])[0],
                                  [1] + [MASK_ID] * 6 + [2])
    np.testing.assert_array_equal(to_numpy(x["mask_positions"])[0],
                                  np.arange(1, 7))
    np.testing.assert_array_equal(to_numpy(y)[0], ids[:6])
    np.testing.assert_array_equal(to_numpy(sample_weight)[0], 1.0)
    # A pair: segment ids 0 then 1; shorter texts pad the selections.
    x, y, sample_weight = preprocessor(x=(["the cast ."], ["a mess ."]))
    np.testing.assert_array_equal(to_numpy(x["segment_ids"])[0],
                                  [0, 0, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(to_numpy(sample_weight)[0],
                                  [1, 1, 1, 1, 1, 0])


def test_preprocessor_config_and_default_selection_length():
    preprocessor = SynthesizerMaskedLMPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=16,
        mask_selection_rate=0.3, mask_token_rate=0.5, random_token_rate=0.2,
        truncate="waterfall")
    config = preprocessor.get_config()
    for key, value in {"sequence_length": 16, "mask_selection_rate": 0.3,
                       "mask_selection_length": None, "mask_token_rate": 0.5,
                       "random_token_rate": 0.2,
                       "truncate": "waterfall"}.items():
        assert config[key] == value, key
    # ceil(0.3 * 16 + 3 * sqrt(16 * 0.3 * 0.7)) = ceil(4.8 + 5.5)
    assert preprocessor.mask_selection_length == 11
    preprocessor.sequence_length = 128
    assert preprocessor.mask_selection_length == 54
    x, _, _ = preprocessor(TEXTS[:2])
    assert tuple(x["mask_positions"].shape) == (2, 54)
    assert tuple(x["token_ids"].shape) == (2, 128)
    import tensorflow as tf

    def tf_data():  # (a dataset keeps the graph it traced)
        return next(iter(tf.data.Dataset.from_tensor_slices(
            TEXTS[:2]).batch(2).map(preprocessor)))

    assert tuple(tf_data()[0]["mask_positions"].shape) == (2, 54)
    preprocessor.sequence_length = 16  # after calls: the length follows
    for x, _, _ in (preprocessor(TEXTS[:2]), tf_data()):
        assert tuple(x["mask_positions"].shape) == (2, 11)
        assert tuple(x["token_ids"].shape) == (2, 16)
    preprocessor.sequence_length = 128
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(preprocessor))
    assert isinstance(restored, SynthesizerMaskedLMPreprocessor)
    assert (restored.sequence_length, restored.mask_selection_length,
            restored.mask_token_rate, restored.truncate) == (
        128, 54, 0.5, "waterfall")
    # BERT's defaults.
    default = SynthesizerMaskedLMPreprocessor(SynthesizerTokenizer(VOCAB))
    assert (default.sequence_length, default.mask_selection_rate,
            default.mask_token_rate, default.random_token_rate) == (
        128, 0.15, 0.8, 0.1)
    assert default.mask_selection_length == 32


@pytest.mark.parametrize("kwargs, message", [
    ({"mask_selection_rate": 1.5}, "mask_selection_rate"),
    ({"mask_selection_rate": -0.1}, "mask_selection_rate"),
    ({"mask_token_rate": "high"}, "mask_token_rate"),
    ({"random_token_rate": 2}, "random_token_rate"),
    ({"mask_token_rate": 0.9, "random_token_rate": 0.2},
     "must not exceed 1"),
    ({"sequence_length": 0}, "sequence_length"),
    ({"sequence_length": -4}, "sequence_length"),
    ({"sequence_length": 16.0}, "sequence_length"),
    ({"mask_selection_length": 0}, "mask_selection_length"),
    ({"truncate": "left"}, "truncate"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        SynthesizerMaskedLMPreprocessor(SynthesizerTokenizer(VOCAB), **kwargs)
    assert "Received" in str(info.value)


def test_preprocessor_longer_than_backbone_is_refused():
    preprocessor = SynthesizerMaskedLMPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=32)
    with pytest.raises(ValueError, match="max_sequence_length"):
        SynthesizerMaskedLM(make_backbone(max_sequence_length=16),
                            preprocessor=preprocessor)


# --- the model ------------------------------------------------------------

def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_head_is_tied_to_the_token_embedding():
    keras.utils.set_random_seed(0)
    masked_lm = make_masked_lm()
    backbone, head = masked_lm.backbone, masked_lm.masked_lm_head
    embedding = backbone.embeddings.token_embedding
    assert head.token_embedding is embedding
    assert not any("output_kernel" in w.path for w in masked_lm.weights)
    # The head's one embedding variable is the backbone's, counted once.
    head_embeddings = [w for w in head.weights if "embeddings" in w.path]
    assert len(head_embeddings) == 1
    assert head_embeddings[0] is embedding.embeddings
    n_unique = len({id(w) for w in masked_lm.weights})
    assert n_unique == len(masked_lm.weights)
    assert len(masked_lm.weights) == len(backbone.weights) + 5  # dense, LN, bias
    # float64 NumPy reference: gather, dense + activation, LN, E^T + bias.
    x, _, _ = fixed_inputs()
    rng = np.random.default_rng(1)
    embedding.embeddings.assign(
        rng.normal(size=embedding.embeddings.shape).astype("float32"))
    head._bias.assign(rng.normal(size=head._bias.shape).astype("float32"))
    logits = to_numpy(masked_lm(x))
    assert logits.dtype == np.float32
    hidden = to_numpy(backbone({k: v for k, v in x.items()
                                if k != "mask_positions"})["sequence_output"])
    gathered = np.take_along_axis(
        hidden.astype("float64"), x["mask_positions"][..., None], axis=1)
    dense = head._intermediate_dense
    h = np.maximum(gathered @ to_numpy(dense.kernel) + to_numpy(dense.bias),
                   0)  # the backbone's activation, relu
    norm = head._intermediate_layer_norm
    h = layer_norm(h, to_numpy(norm.gamma), to_numpy(norm.beta),
                   norm.epsilon)
    expected = h @ to_numpy(embedding.embeddings).T + to_numpy(head._bias)
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)


def test_float32_logits_under_mixed_precision():
    masked_lm = make_masked_lm(dtype="mixed_bfloat16")
    assert masked_lm.backbone.compute_dtype == "bfloat16"
    x, y, weights = fixed_inputs()
    logits = masked_lm(x)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert tuple(logits.shape) == (3, 4, len(VOCAB))
    masked_lm.preprocessor = None
    masked_lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    loss = masked_lm.train_on_batch(x, y, sample_weight=weights,
                                    return_dict=True)["loss"]
    assert np.isfinite(loss)


def masked_cross_entropy(logits, labels, weights):
    logits = logits.astype("float64")
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    return float((nll * weights).sum() / weights.sum())


def test_loss_only_on_masked_positions():
    keras.utils.set_random_seed(2)
    masked_lm = make_masked_lm()
    perturb(masked_lm)
    head = masked_lm.masked_lm_head  # logits far from uniform:
    head._bias.assign(np.random.default_rng(1).normal(
        0, 3, head._bias.shape).astype("float32"))
    masked_lm.preprocessor = None
    masked_lm.compile()
    x, y, weights = fixed_inputs()
    logits = to_numpy(masked_lm.predict(x, verbose=0))
    expected = masked_cross_entropy(logits, y, weights)

    def loss_of(labels, predictions=logits):
        return float(to_numpy(masked_lm.loss(labels, predictions, weights)))

    assert loss_of(y) == pytest.approx(expected, rel=1e-5)
    evaluated = masked_lm.evaluate(x, y, sample_weight=weights, verbose=0,
                                   return_dict=True)
    assert evaluated["loss"] == pytest.approx(expected, rel=1e-4)
    # Labels and logits at the unselected (weight 0) positions do not count.
    other_y = np.where(weights > 0, y, (y + 3) % len(VOCAB))
    other_logits = np.where(weights[..., None] > 0, logits,
                            logits + np.random.default_rng(0).normal(
                                0, 5, logits.shape).astype("float32"))
    assert loss_of(other_y, other_logits) == pytest.approx(expected,
                                                           rel=1e-5)
    assert masked_lm.evaluate(x, other_y, sample_weight=weights, verbose=0,
                              return_dict=True)["loss"] == pytest.approx(
        evaluated["loss"], rel=1e-5)
    # ... those at selected positions do.
    changed = np.where(weights > 0, (y + 3) % len(VOCAB), y)
    changed_expected = masked_cross_entropy(logits, changed, weights)
    assert abs(changed_expected - expected) > 0.1
    assert loss_of(changed) == pytest.approx(changed_expected, rel=1e-5)
    # The weighted accuracy counts the selected positions only.
    hits = (logits.argmax(-1) == y)
    accuracy = float((hits * weights).sum() / weights.sum())
    assert evaluated["sparse_categorical_accuracy"] == pytest.approx(
        accuracy, abs=1e-6)


def test_fit_on_raw_strings_loss_falls():
    keras.utils.set_random_seed(3)
    masked_lm = make_masked_lm(num_layers=1)
    masked_lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    # The loss on one fixed masking of the corpus, before and after.
    x, y, weights = masked_lm.preprocessor(TEXTS * 4)

    def fixed_loss():
        return float(to_numpy(masked_lm.loss(y, masked_lm(x), weights)))

    before = fixed_loss()
    history = masked_lm.fit(TEXTS * 16, batch_size=8, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3
    assert fixed_loss() < 0.75 * before, (before, history.history["loss"])


def backbone_arrays(backbone):
    return [to_numpy(w) for w in backbone.weights]


def test_preset_round_trip(tmp_path):
    keras.utils.set_random_seed(4)
    masked_lm = make_masked_lm()
    perturb(masked_lm)
    masked_lm.save_to_preset(str(tmp_path))
    with open(os.path.join(tmp_path, "preprocessor.json")) as f:
        assert json.load(f)["registered_name"] == (
            "keras_synth>SynthesizerMaskedLMPreprocessor")
    restored = SynthesizerMaskedLM.from_preset(str(tmp_path))
    assert isinstance(restored.preprocessor, SynthesizerMaskedLMPreprocessor)
    assert (restored.preprocessor.get_config()
            == masked_lm.preprocessor.get_config())
    x, _, _ = masked_lm.preprocessor(TEXTS[:3])
    np.testing.assert_array_equal(to_numpy(restored(x)),
                                  to_numpy(masked_lm(x)))
    # keras-hub's generic loader finds the class too.
    import keras_hub

    generic = keras_hub.models.MaskedLM.from_preset(str(tmp_path))
    assert isinstance(generic, SynthesizerMaskedLM)
    np.testing.assert_array_equal(to_numpy(generic(x)),
                                  to_numpy(masked_lm(x)))


def test_classifier_from_masked_lm_preset(tmp_path):
    keras.utils.set_random_seed(5)
    masked_lm = make_masked_lm()
    perturb(masked_lm)
    masked_lm.save_to_preset(str(tmp_path))
    classifier = SynthesizerTextClassifier.from_preset(str(tmp_path),
                                                       num_classes=3)
    for got, want in zip(backbone_arrays(classifier.backbone),
                         backbone_arrays(masked_lm.backbone)):
        np.testing.assert_array_equal(got, want)
    assert classifier.output_dense.units == 3
    preprocessor = classifier.preprocessor
    assert isinstance(preprocessor, SynthesizerTextClassifierPreprocessor)
    # The preset's length (16: the class default 128 would exceed the
    # backbone's max_sequence_length) and vocabulary.
    assert preprocessor.sequence_length == 16
    assert (preprocessor.tokenizer.get_vocabulary()
            == masked_lm.preprocessor.tokenizer.get_vocabulary())
    x = preprocessor(TEXTS[:2])
    assert tuple(x["token_ids"].shape) == (2, 16)
    assert classifier.predict(TEXTS[:2], verbose=0).shape == (2, 3)
    # The preprocessor class alone, and an explicit length.
    alone = SynthesizerTextClassifierPreprocessor.from_preset(str(tmp_path))
    assert alone.sequence_length == 16
    shorter = SynthesizerTextClassifierPreprocessor.from_preset(
        str(tmp_path), sequence_length=8)
    assert shorter.sequence_length == 8
