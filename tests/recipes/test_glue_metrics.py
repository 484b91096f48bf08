"""GLUE metrics: values worked out by hand (pure Python: every backend)."""

import math

import pytest

from recipes.glue import metrics, tasks


def test_accuracy():
    assert metrics.accuracy([1, 0, 2, 2], [1, 0, 2, 0]) == 0.75
    assert metrics.accuracy([0, 0], [1, 1]) == 0.0


@pytest.mark.parametrize("labels, predictions, expected", [
    # tp=1, fp=0, fn=1: 2tp / (2tp + fp + fn)
    ([1, 1, 0, 0], [1, 0, 0, 0], 2 / 3),
    # tp=2, fp=1, fn=1
    ([1, 1, 1, 0, 0], [1, 1, 0, 1, 0], 2 / 3),
    ([0, 0, 0], [0, 0, 0], 0.0),  # no positives at all
    ([1, 1, 1], [0, 0, 0], 0.0),
    ([1, 0, 1], [1, 0, 1], 1.0),
])
def test_f1(labels, predictions, expected):
    assert metrics.f1(labels, predictions) == pytest.approx(expected)


@pytest.mark.parametrize("labels, predictions, expected", [
    ([0, 1, 1, 0], [0, 1, 1, 0], 1.0),
    ([0, 1, 1, 0], [1, 0, 0, 1], -1.0),
    # tp=2, tn=1, fp=1, fn=0: (tp tn - fp fn) / sqrt(3 * 2 * 2 * 1)
    ([1, 1, 0, 0], [1, 1, 1, 0], 2 / math.sqrt(12)),
    ([1, 1, 0, 0], [1, 1, 1, 1], 0.0),  # constant predictions
    # Three classes, confusion [[1, 1, 0], [0, 2, 0], [0, 0, 1]]: Gorodkin's
    # (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)), c=4, s=5, t=(2,2,1),
    # p=(1,3,1): t.p = 9, p.p = 11, t.t = 9.
    ([0, 0, 1, 1, 2], [0, 1, 1, 1, 2], (4 * 5 - 9) / math.sqrt(
        (25 - 11) * (25 - 9))),
])
def test_matthews_corr(labels, predictions, expected):
    assert metrics.matthews_corr(labels, predictions) == pytest.approx(
        expected)


def test_pearson_and_spearman():
    x = [1.0, 2.0, 3.0, 4.0]
    assert metrics.pearson(x, [2.0, 4.0, 6.0, 8.0]) == pytest.approx(1.0)
    assert metrics.pearson(x, [8.0, 6.0, 4.0, 2.0]) == pytest.approx(-1.0)
    # Centred x = (-1.5, -0.5, 0.5, 1.5), y = (-1, -1, 1, 1):
    # sum xy = 4, |x| = sqrt(5), |y| = 2.
    assert metrics.pearson(x, [0, 0, 2, 2]) == pytest.approx(
        4 / (math.sqrt(5) * 2))
    # Monotone but not linear: ranks agree exactly.
    assert metrics.spearman(x, [1, 10, 100, 1000]) == pytest.approx(1.0)
    assert metrics.pearson(x, [1, 10, 100, 1000]) < 0.9
    # Ties get their average rank: y ranks (1.5, 1.5, 3.5, 3.5).
    assert metrics.spearman(x, [5, 5, 7, 7]) == pytest.approx(
        4 / (math.sqrt(5) * 2))
    # A constant side has no correlation: 0, not NaN.
    assert metrics.pearson(x, [3, 3, 3, 3]) == 0.0
    assert metrics.spearman([3, 3, 3, 3], x) == 0.0


def test_compute_metrics_per_task():
    labels, predictions = [1, 1, 0, 0], [1, 1, 1, 0]
    values = metrics.compute_metrics(tasks.get_task("mrpc"), labels,
                                     predictions)
    assert values == {"f1": pytest.approx(0.8),
                      "accuracy": pytest.approx(0.75)}
    assert list(values) == ["f1", "accuracy"]
    values = metrics.compute_metrics(tasks.get_task("stsb"), [1, 2, 3, 4],
                                     [2, 4, 6, 8])
    assert list(values) == ["pearson", "spearman"]
    assert values["pearson"] == pytest.approx(1.0)
    values = metrics.compute_metrics(tasks.get_task("cola"), labels,
                                     predictions)
    assert values["matthews_corr"] == pytest.approx(2 / math.sqrt(12))
    with pytest.raises(ValueError, match="2 labels and 1 predictions"):
        metrics.compute_metrics(tasks.get_task("sst2"), [0, 1], [0])


def test_macro_f1_and_cb_score():
    # Per class (0, 1, 2): precision 1/3, 1, 0 and recall 1, 1/2, 0, so
    # F1 1/2, 2/3, 0 (class 2 is labelled but never predicted): 7/18.
    labels, predictions = [0, 1, 1, 2], [0, 1, 0, 0]
    assert metrics.macro_f1(labels, predictions, 3) == pytest.approx(7 / 18)
    # A class neither labelled nor predicted still counts (F1 0), as in
    # SuperGLUE's 3-class average; without `num_classes`, the seen ones.
    assert metrics.macro_f1([0, 1], [0, 1], 3) == pytest.approx(2 / 3)
    assert metrics.macro_f1([0, 1], [0, 1]) == 1.0
    assert metrics.acc_and_f1(labels, predictions, 3) == pytest.approx(
        (0.5 + 7 / 18) / 2)
    values = metrics.compute_metrics(tasks.get_task("cb"), labels,
                                     predictions)
    assert list(values) == ["acc_and_f1", "accuracy", "macro_f1"]
    assert values == {"acc_and_f1": pytest.approx((0.5 + 7 / 18) / 2),
                      "accuracy": 0.5, "macro_f1": pytest.approx(7 / 18)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_macro_f1_is_scikit_learns(seed):
    import numpy as np
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(seed)
    labels, predictions = rng.integers(0, 3, 40), rng.integers(0, 3, 40)
    assert metrics.macro_f1(list(labels), list(predictions), 3) == (
        pytest.approx(f1_score(labels, predictions, average="macro")))


@pytest.mark.parametrize("name", ["boolq", "copa", "superglue_rte", "wic",
                                  "wsc"])
def test_superglue_accuracy_tasks(name):
    values = metrics.compute_metrics(tasks.get_task(name), [1, 0, 1, 1],
                                     [1, 0, 0, 1])
    assert values == {"accuracy": 0.75}
