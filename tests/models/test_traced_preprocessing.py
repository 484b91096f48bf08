"""`TracedPreprocessingMixin`: `fit`/`evaluate`/`predict` on raw strings
trace a deterministic preprocessor once, give the eager preprocessing's
outputs, and trace again when the preprocessor's config changes."""

import numpy as np
import pytest

from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from tests.models.model_utils import LABELS
from tests.models.model_utils import TEXTS
from tests.models.model_utils import VOCAB
from tests.models.model_utils import make_backbone
from tests.models.model_utils import to_numpy


class CountingPreprocessor(SynthesizerTextClassifierPreprocessor):
    """Counts the Python runs of `call`: one per trace in a `tf.data` map."""

    runs = 0

    def call(self, *args, **kwargs):
        type(self).runs += 1
        return super().call(*args, **kwargs)


class RandomCountingPreprocessor(CountingPreprocessor):
    draws_random = True


def make(preprocessor_cls, sequence_length=16):
    preprocessor_cls.runs = 0
    preprocessor = preprocessor_cls(SynthesizerTokenizer(VOCAB),
                                    sequence_length=sequence_length)
    return SynthesizerTextClassifier(
        make_backbone("random+vanilla", 16), num_classes=2,
        preprocessor=preprocessor, dropout=0.0)


def eager_predict(model, texts):
    """The model on the preprocessor's eager outputs: no `tf.data` map."""
    return to_numpy(model(model.preprocessor(texts), training=False))


def test_predict_fit_evaluate_trace_once_with_eager_outputs():
    model = make(CountingPreprocessor)
    first = model.predict(TEXTS, batch_size=4, verbose=0)
    traced = CountingPreprocessor.runs
    assert traced >= 1
    for _ in range(2):
        np.testing.assert_array_equal(
            model.predict(TEXTS, batch_size=4, verbose=0), first)
    assert CountingPreprocessor.runs == traced
    np.testing.assert_allclose(first, eager_predict(model, TEXTS),
                               rtol=1e-6, atol=1e-6)

    # With labels: one more trace (another input structure), then reused.
    model.compile(loss="sparse_categorical_crossentropy", optimizer="sgd")
    model.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    with_labels = CountingPreprocessor.runs
    assert with_labels > traced
    model.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    model.evaluate(TEXTS, LABELS, batch_size=4, verbose=0)
    assert CountingPreprocessor.runs == with_labels


def test_a_new_config_or_preprocessor_is_traced_again():
    model = make(CountingPreprocessor)
    model.predict(TEXTS, verbose=0)
    traced = CountingPreprocessor.runs
    # A shorter sequence_length is honoured, not the cached graph's 16.
    model.preprocessor.sequence_length = 5
    short = model.predict(TEXTS, verbose=0)
    assert CountingPreprocessor.runs > traced
    assert model.preprocessor(TEXTS)["token_ids"].shape == (len(TEXTS), 5)
    np.testing.assert_allclose(short, eager_predict(model, TEXTS),
                               rtol=1e-6, atol=1e-6)
    assert not np.allclose(short, eager_predict(make(CountingPreprocessor),
                                                TEXTS))

    # Another preprocessor object, same config: traced for itself.
    model.preprocessor = CountingPreprocessor(SynthesizerTokenizer(VOCAB),
                                              sequence_length=5)
    before = CountingPreprocessor.runs
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), short,
                               rtol=1e-6, atol=1e-6)
    assert CountingPreprocessor.runs > before


@pytest.mark.parametrize("preprocessor_cls", [RandomCountingPreprocessor])
def test_random_preprocessors_are_traced_at_every_call(preprocessor_cls):
    model = make(preprocessor_cls)
    model.predict(TEXTS, verbose=0)
    once = preprocessor_cls.runs
    model.predict(TEXTS, verbose=0)
    assert preprocessor_cls.runs == 2 * once


def test_the_random_and_deterministic_preprocessors_say_so():
    from keras_synth.models import SynthesizerCausalLMPreprocessor
    from keras_synth.models import SynthesizerMaskedLMPreprocessor
    from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
    from keras_synth.models import SynthesizerSpanCorruptionPreprocessor

    assert SynthesizerMaskedLMPreprocessor.draws_random
    assert SynthesizerSpanCorruptionPreprocessor.draws_random
    for cls in (SynthesizerTextClassifierPreprocessor,
                SynthesizerCausalLMPreprocessor,
                SynthesizerSeq2SeqLMPreprocessor):
        assert cls.draws_random is False
