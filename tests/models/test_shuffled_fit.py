"""`ShuffledFitMixin`: a task's `fit` on in-memory data reads every example
once per epoch, shuffled anew each epoch (`shuffle=True`) or in order, from
one repeating dataset (`steps_per_epoch` = its batches), so that Keras
keeps one iterator for the whole `fit`."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models.shuffled_fit import ShuffledFitMixin
from keras_synth.models.shuffled_fit import in_memory_dataset
from keras_synth.models.shuffled_fit import is_in_memory


def epochs_of(ds, steps, epochs):
    """The examples (first element of each pair) of `epochs` epochs of
    `steps` batches, one list per epoch, and the batch sizes."""
    batches = [x.numpy().tolist() for x, _ in ds.take(steps * epochs)]
    return ([sum(batches[e * steps:(e + 1) * steps], [])
             for e in range(epochs)], [len(b) for b in batches])


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_example_once_per_epoch(shuffle):
    tf.random.set_seed(0)
    data = (list(range(21)), [0] * 21)
    ds, steps = in_memory_dataset(data, batch_size=4, shuffle=shuffle)
    assert steps == 6
    assert ds.cardinality() == tf.data.INFINITE_CARDINALITY
    epochs, sizes = epochs_of(ds, steps, 3)
    assert sizes == [4, 4, 4, 4, 4, 1] * 3  # the last batch partial
    for epoch in epochs:
        assert sorted(epoch) == list(range(21))
    if shuffle:  # a new order each epoch
        assert epochs[0] != epochs[1] != epochs[2] != list(range(21))
    else:
        assert epochs == [list(range(21))] * 3


def test_given_steps_per_epoch_does_not_repeat():
    ds, steps = in_memory_dataset((list(range(10)), [0] * 10), batch_size=4,
                                  shuffle=False, steps_per_epoch=2)
    assert steps == 2 and int(ds.cardinality()) == 3


def test_in_memory_is_data_not_loaders():
    assert is_in_memory((["a", "b"], np.array([0, 1])))
    assert is_in_memory(({"x": np.zeros((2, 3))}, None, None))
    assert not is_in_memory((tf.data.Dataset.range(3), None, None))
    assert not is_in_memory(((i for i in range(3)), None, None))


class _Recorder:
    def fit(self, **kwargs):
        self.received = kwargs
        return kwargs


class _Probe(ShuffledFitMixin, _Recorder):
    pass


def test_mixin_passes_one_repeating_dataset_and_its_steps():
    probe = _Probe()
    probe.fit(["a", "b", "c", "d", "e"], np.arange(5), batch_size=2,
              epochs=3)
    got = probe.received
    assert isinstance(got["x"], tf.data.Dataset)
    assert got["x"].cardinality() == tf.data.INFINITE_CARDINALITY
    assert got["steps_per_epoch"] == 3 and got["epochs"] == 3
    assert got["y"] is None and got["batch_size"] is None
    assert got["shuffle"] is False  # (Keras ignores it for datasets)
    # A dataset, or a validation split, is Keras's as before.
    ds = tf.data.Dataset.from_tensor_slices((["a"], [0])).batch(1)
    probe.fit(ds, epochs=2)
    assert probe.received["x"] is ds
    assert probe.received["steps_per_epoch"] is None
    probe.fit(["a", "b"], np.arange(2), validation_split=0.5)
    assert probe.received["x"] == ["a", "b"]


def test_task_fit_trains_every_batch_of_every_epoch():
    """A classifier's `fit` on raw strings: 3 epochs of 3 batches (the
    last partial) are 9 optimizer steps and 3 history rows; it learns."""
    keras.utils.set_random_seed(0)
    texts = ["good film", "bad film", "great plot", "awful plot",
             "good plot", "bad plot", "great film", "awful film", "good",
             "bad"]
    labels = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0])
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad",
             "great", "awful", "film", "plot"]
    preprocessor = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(vocab), sequence_length=6)
    backbone = SynthesizerBackbone(
        vocabulary_size=len(vocab), num_layers=1, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=6,
        synthesizer="dense")
    classifier = SynthesizerTextClassifier(backbone, 2, preprocessor)
    classifier.compile(optimizer=keras.optimizers.Adam(3e-2))
    history = classifier.fit(texts, labels, batch_size=4, epochs=3,
                             verbose=0)
    assert len(history.history["loss"]) == 3
    assert int(classifier.optimizer.iterations) == 9
    assert history.history["loss"][-1] < history.history["loss"][0]
