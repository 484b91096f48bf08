"""`--objective=mlm`'s masking (`recipes.pretrain.objectives.bert_mask`):
BERT's rule checked position by position against the input, the 80/10/10
split measured, and the same masks from the same seed, so that a resumed
run's batches equal an uninterrupted run's (TensorFlow ops in tf.data, on
every backend)."""

import math
import types

import numpy as np
import pytest
import tensorflow as tf

from recipes.pretrain import objectives

PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIAL = [PAD, CLS, SEP]
VOCAB = 50


def _rows(count, width, seed=0):
    """`[CLS] tokens [SEP] [PAD]...` rows of random lengths (some empty)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((count, width), "int32")
    lengths = rng.integers(0, width - 1, count)
    for row, length in enumerate(lengths):
        ids[row, 0] = CLS
        ids[row, 1:length + 1] = rng.integers(4, VOCAB, length)
        ids[row, length + 1] = SEP
    return ids


def _mask(ids, seed, rate=0.15, slots=8):
    return [t.numpy() for t in objectives.bert_mask(
        tf.constant(ids), tf.constant(seed, tf.int64), SPECIAL, MASK, VOCAB,
        rate, slots)]


@pytest.mark.parametrize("rate, slots", [(0.15, 8), (0.5, 3), (1.0, 30)])
def test_bert_mask_follows_the_rule_row_by_row(rate, slots):
    ids = _rows(64, 30)
    masked, positions, labels, weights = _mask(ids, [7, 3], rate, slots)
    assert masked.shape == ids.shape
    assert positions.shape == labels.shape == weights.shape == (64, slots)
    for row in range(len(ids)):
        selectable = np.flatnonzero(~np.isin(ids[row], SPECIAL))
        k = min(slots, math.ceil(rate * len(selectable)))
        np.testing.assert_array_equal(weights[row], [1.0] * k
                                      + [0.0] * (slots - k))
        chosen = positions[row, :k]
        assert np.all(np.diff(chosen) > 0), chosen  # increasing, distinct
        assert np.isin(chosen, selectable).all(), chosen
        np.testing.assert_array_equal(labels[row, :k], ids[row, chosen])
        assert not positions[row, k:].any() and not labels[row, k:].any()
        kept = np.setdiff1d(np.arange(ids.shape[1]), chosen)
        np.testing.assert_array_equal(masked[row, kept], ids[row, kept])
        assert ((masked[row, chosen] >= 0)
                & (masked[row, chosen] < VOCAB)).all()


def test_bert_mask_replaces_80_10_10():
    ids = _rows(2000, 40, seed=1)
    masked, positions, labels, weights = _mask(ids, [0, 0], 0.5, 20)
    taken = weights > 0
    new = np.take_along_axis(masked, positions, 1)[taken]
    old = labels[taken]
    n = len(new)
    assert n > 15000
    as_mask = np.mean(new == MASK)
    kept = np.mean(new == old)
    # A random replacement lands on MASK or on the old id 1 time in VOCAB.
    assert as_mask == pytest.approx(0.8 + 0.1 / VOCAB, abs=0.015)
    assert kept == pytest.approx(0.1 + 0.1 / VOCAB, abs=0.01)
    others = new[(new != MASK) & (new != old)]
    assert len(others) == pytest.approx(0.1 * n * (1 - 2 / VOCAB), rel=0.1)
    # The random ids are uniform over the vocabulary.
    assert len(np.unique(others)) == VOCAB - 1  # all but MASK itself


def test_bert_mask_same_seed_same_masks_other_seed_other_masks():
    ids = _rows(32, 30)
    first, again, other = (_mask(ids, [5, 9]), _mask(ids, [5, 9]),
                           _mask(ids, [5, 10]))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[1], other[1])


def _mlm_args(**overrides):
    args = dict(seed=3, batch_size=4, sequence_length=12,
                mask_selection_rate=0.15, eval_batch_size=5)
    args.update(overrides)
    return types.SimpleNamespace(**args)


class _Tokenizer:
    ids = {"[PAD]": PAD, "[CLS]": CLS, "[SEP]": SEP, "[MASK]": MASK}

    def token_to_id(self, token):
        return self.ids[token]

    def vocabulary_size(self):
        return VOCAB


def _batches(dataset, count):
    return [tf.nest.map_structure(lambda t: t.numpy(), batch)
            for batch in dataset.take(count)]


def test_resumed_mlm_batches_equal_the_uninterrupted_ones():
    rng = np.random.default_rng(0)
    windows = rng.integers(4, VOCAB, (10, 10)).astype("int32")
    lengths = rng.integers(1, 11, 10).astype("int32")
    objective, args = objectives.MaskedLanguageModel(), _mlm_args()
    steps = 3
    straight = _batches(objective.train_dataset(
        _Tokenizer(), (windows, lengths), args, steps, 0), 2 * steps)
    resumed = _batches(objective.train_dataset(
        _Tokenizer(), (windows, lengths), args, steps, 1), steps)
    for want, got in zip(straight[steps:], resumed):
        tf.nest.map_structure(np.testing.assert_array_equal, want, got)
    # Each batch: [CLS] window [SEP], masked; a new mask each time.
    x, y, w = straight[0]
    assert (x["token_ids"][:, 0] == CLS).all()
    padding = x["padding_mask"]  # [CLS] window [SEP], then padding
    assert (np.diff(padding, axis=1) <= 0).all() and padding[:, :2].all()
    assert ((x["token_ids"] != PAD) <= (padding == 1)).all()
    assert w.sum() > 0
    assert not np.array_equal(straight[0][0]["mask_positions"],
                              straight[1][0]["mask_positions"])


def test_heldout_masks_are_fixed_and_seeded():
    rng = np.random.default_rng(1)
    windows = rng.integers(4, VOCAB, (12, 10)).astype("int32")
    lengths = np.full(12, 10, "int32")
    objective = objectives.MaskedLanguageModel()
    first = _batches(objective.heldout_dataset(
        _Tokenizer(), (windows, lengths), _mlm_args()), 10)
    again = _batches(objective.heldout_dataset(
        _Tokenizer(), (windows, lengths), _mlm_args()), 10)
    other = _batches(objective.heldout_dataset(
        _Tokenizer(), (windows, lengths), _mlm_args(seed=4)), 10)
    assert [len(b[1]) for b in first] == [5, 5, 2]
    tf.nest.map_structure(np.testing.assert_array_equal, first, again)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(first, other))
