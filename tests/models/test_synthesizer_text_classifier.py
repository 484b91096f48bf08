import json
import os

import keras
import keras_hub
import numpy as np
import pytest

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import export_text_classifier
from tests.models.model_utils import LABELS
from tests.models.model_utils import TEXTS
from tests.models.model_utils import VOCAB
from tests.models.model_utils import make_backbone
from tests.models.model_utils import make_classifier
from tests.models.model_utils import to_numpy

BACKEND = keras.backend.backend()


def fit_losses(classifier, x, y, epochs=8, **compile_kwargs):
    keras.utils.set_random_seed(0)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-2),
                       **compile_kwargs)
    history = classifier.fit(x=x, y=y, batch_size=4, epochs=epochs,
                             shuffle=False, verbose=0)
    return history.history["loss"]


@pytest.mark.parametrize("synthesizer", ["vanilla", "random",
                                         "random+vanilla"])
def test_fit_on_raw_strings_loss_falls_and_predict(synthesizer):
    keras.utils.set_random_seed(1)
    classifier = make_classifier(synthesizer)
    losses = fit_losses(classifier, TEXTS, LABELS, epochs=10)
    assert losses[-1] < 0.5 * losses[0], losses
    logits = classifier.predict(TEXTS, verbose=0)
    assert logits.shape == (len(TEXTS), 2)
    assert (logits.argmax(-1) == LABELS).mean() >= 0.75  # chance: 0.5
    # predict on raw strings is the model on the preprocessor's output.
    direct = classifier(classifier.preprocessor(TEXTS[:3]))
    np.testing.assert_allclose(to_numpy(direct), logits[:3], rtol=1e-4,
                               atol=1e-5)


def test_sentence_pairs():
    keras.utils.set_random_seed(2)
    classifier = make_classifier("random+vanilla", num_classes=3,
                                 sequence_length=24, num_segments=2)
    firsts, seconds = TEXTS, TEXTS[::-1]
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], "int32")
    losses = fit_losses(classifier, (firsts, seconds), labels, epochs=10)
    assert losses[-1] < 0.5 * losses[0], losses
    logits = classifier.predict((firsts, seconds), verbose=0)
    assert logits.shape == (8, 3)
    swapped = classifier.predict((seconds, firsts), verbose=0)
    assert not np.allclose(logits, swapped)


def test_regression():
    keras.utils.set_random_seed(3)
    classifier = make_classifier("random", num_classes=1)
    # STS-B-like scores: 4.0 for the positive sentences, 1.0 otherwise.
    scores = np.where(LABELS == 1, 4.0, 1.0).astype("float32")
    losses = fit_losses(classifier, TEXTS, scores, epochs=10)
    assert isinstance(classifier.loss, keras.losses.MeanSquaredError)
    assert losses[-1] < 0.5 * losses[0], losses
    predicted = classifier.predict(TEXTS, verbose=0)
    assert predicted.shape == (len(TEXTS), 1)
    assert predicted[LABELS == 1].mean() > predicted[LABELS == 0].mean()
    mse = float(np.mean((predicted[:, 0] - scores) ** 2))
    assert mse == pytest.approx(classifier.evaluate(
        TEXTS, scores, verbose=0, return_dict=True)["loss"], rel=1e-3)


@pytest.mark.skipif(BACKEND == "torch", reason="jit_compile: TF and JAX")
def test_jit_compile_fit_and_predict():
    keras.utils.set_random_seed(4)
    classifier = make_classifier("random+vanilla")
    losses = fit_losses(classifier, TEXTS, LABELS, epochs=6,
                        jit_compile=True)
    assert classifier.jit_compile
    assert losses[-1] < 0.5 * losses[0], losses
    compiled = classifier.predict(TEXTS, verbose=0)
    eager = to_numpy(classifier(classifier.preprocessor(TEXTS)))
    np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-5)


def test_keras_file_round_trip(tmp_path):
    classifier = make_classifier("factorized_random", num_segments=2)
    expected = classifier.predict(TEXTS, verbose=0)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is SynthesizerTextClassifier
    assert type(restored.backbone) is SynthesizerBackbone
    np.testing.assert_allclose(restored.predict(TEXTS, verbose=0), expected,
                               rtol=1e-5, atol=1e-6)


def test_preset_round_trip(tmp_path):
    classifier = make_classifier("random+vanilla", num_classes=3,
                                 pooling="cls")
    expected = classifier.predict(TEXTS, verbose=0)
    preset = str(tmp_path / "preset")
    classifier.save_to_preset(preset)
    with open(os.path.join(preset, "config.json")) as f:
        assert json.load(f)["registered_name"] == (
            "keras_synth>SynthesizerBackbone")
    for loader in (SynthesizerTextClassifier,
                   keras_hub.models.TextClassifier):
        restored = loader.from_preset(preset)
        assert type(restored) is SynthesizerTextClassifier
        assert restored.num_classes == 3
        assert restored.preprocessor.sequence_length == 16
        np.testing.assert_allclose(restored.predict(TEXTS, verbose=0),
                                   expected, rtol=1e-5, atol=1e-6)
    backbone = keras_hub.models.Backbone.from_preset(preset)
    assert type(backbone) is SynthesizerBackbone
    assert backbone.get_config() == classifier.backbone.get_config()
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(preset)
    assert type(tokenizer) is SynthesizerTokenizer
    assert tokenizer.get_vocabulary() == VOCAB
    # A new head on the preset's backbone (task weights not loaded).
    fresh = SynthesizerTextClassifier.from_preset(preset, num_classes=5)
    assert fresh.predict(TEXTS[:2], verbose=0).shape == (2, 5)
    np.testing.assert_allclose(
        to_numpy(fresh.backbone.embeddings.token_embedding.embeddings),
        to_numpy(classifier.backbone.embeddings.token_embedding.embeddings))


def test_unknown_preset_directory(tmp_path):
    missing = str(tmp_path / "no_such_preset")
    for loader in (SynthesizerTextClassifier, SynthesizerBackbone,
                   SynthesizerTokenizer,
                   SynthesizerTextClassifierPreprocessor):
        with pytest.raises(FileNotFoundError,
                           match="no preset directory at .*no_such_preset"):
            loader.from_preset(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        SynthesizerTextClassifier.from_preset(str(empty))


def test_preset_of_another_class(tmp_path):
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=8)
    bert_preset = str(tmp_path / "bert")
    bert.save_to_preset(bert_preset)
    with pytest.raises(ValueError, match="BertBackbone.*SynthesizerBackbone"):
        SynthesizerBackbone.from_preset(bert_preset)
    with pytest.raises(ValueError, match="holds a `BertBackbone`, but "
                       "`SynthesizerTextClassifier.from_preset` expects a "
                       "preset with a `SynthesizerBackbone`"):
        SynthesizerTextClassifier.from_preset(bert_preset)
    ours = str(tmp_path / "ours")
    make_backbone().save_to_preset(ours)
    with pytest.raises(ValueError,
                       match="SynthesizerBackbone.*BertBackbone"):
        keras_hub.models.BertBackbone.from_preset(ours)


def test_sequence_length_beyond_the_backbone():
    preprocessor = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=32)
    with pytest.raises(ValueError, match=r"`sequence_length`=32 exceeds "
                       r"the backbone's `max_sequence_length`=16"):
        SynthesizerTextClassifier(make_backbone(max_sequence_length=16),
                                  num_classes=2, preprocessor=preprocessor)


@pytest.mark.parametrize("num_classes", [0, 2.0, "2", True])
def test_bad_num_classes(num_classes):
    with pytest.raises(ValueError, match="num_classes"):
        SynthesizerTextClassifier(make_backbone(), num_classes=num_classes)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
@pytest.mark.parametrize("num_classes", [1, 3])
def test_saved_model_export_takes_raw_strings(tmp_path, num_classes):
    import tensorflow as tf

    classifier = make_classifier("random+vanilla", num_classes=num_classes,
                                 num_segments=2)
    names = None if num_classes == 1 else ["a", "b", "c"]
    path = export_text_classifier(classifier, str(tmp_path / "export"),
                                  label_names=names,
                                  input_names=("sentence1", "sentence2"))
    serve = tf.saved_model.load(path).signatures["serving_default"]
    out = serve(sentence1=tf.constant(TEXTS), sentence2=tf.constant(TEXTS))
    expected = classifier.predict((TEXTS, TEXTS), verbose=0)
    if num_classes == 1:
        np.testing.assert_allclose(out["score"].numpy(), expected[:, 0],
                                   rtol=1e-5, atol=1e-6)
        return
    probabilities = tf.nn.softmax(expected).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), probabilities,
                               rtol=1e-5, atol=1e-6)
    labels = probabilities.argmax(-1)
    np.testing.assert_array_equal(out["label"].numpy(), labels)
    assert [n.decode() for n in out["label_name"].numpy()] == [
        names[i] for i in labels]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow SavedModel")
def test_export_bad_arguments(tmp_path):
    classifier = make_classifier(num_classes=2)
    with pytest.raises(ValueError, match="label_names"):
        export_text_classifier(classifier, str(tmp_path / "a"),
                               label_names=["only one"])
    with pytest.raises(ValueError, match="input_names"):
        export_text_classifier(classifier, str(tmp_path / "b"),
                               input_names=("a", "b", "c"))
    bare = SynthesizerTextClassifier(make_backbone(), num_classes=2)
    with pytest.raises(ValueError, match="no preprocessor"):
        export_text_classifier(bare, str(tmp_path / "c"))
