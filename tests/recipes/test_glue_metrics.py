"""GLUE metrics against scikit-learn and SciPy (pure NumPy: every backend)."""

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from recipes.glue import metrics, tasks

RNG = np.random.default_rng(0)
BINARY = (RNG.integers(0, 2, 50), RNG.integers(0, 2, 50))
MULTI = (RNG.integers(0, 3, 60), RNG.integers(0, 3, 60))
SCORES = (RNG.uniform(0, 5, 40), RNG.uniform(0, 5, 40))
# Ties: STS-B scores repeat (x.0, x.5, ...).
TIED = (np.round(RNG.uniform(0, 5, 40) * 2) / 2,
        np.round(RNG.uniform(0, 5, 40)))


@pytest.mark.parametrize("labels, predictions", [BINARY, MULTI])
def test_accuracy(labels, predictions):
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions))


@pytest.mark.parametrize("labels, predictions", [
    BINARY, ([1, 1, 0, 0], [1, 0, 0, 0]), ([0, 0, 0], [0, 0, 0]),
    ([1, 1, 1], [0, 0, 0])])
def test_f1(labels, predictions):
    assert metrics.f1(labels, predictions) == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions, zero_division=0.0))


@pytest.mark.parametrize("labels, predictions", [
    BINARY, MULTI, ([1, 1, 0, 0], [1, 1, 1, 1]), ([0, 1, 1, 0], [0, 1, 1, 0])])
def test_matthews_corr(labels, predictions):
    assert metrics.matthews_corr(labels, predictions) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions))


@pytest.mark.parametrize("labels, predictions", [SCORES, TIED])
def test_pearson_and_spearman(labels, predictions):
    assert metrics.pearson(labels, predictions) == pytest.approx(
        scipy.stats.pearsonr(labels, predictions)[0])
    assert metrics.spearman(labels, predictions) == pytest.approx(
        scipy.stats.spearmanr(labels, predictions)[0])


def test_compute_metrics_per_task():
    labels, predictions = BINARY
    values = metrics.compute_metrics(tasks.get_task("mrpc"), labels,
                                     predictions)
    assert list(values) == ["f1", "accuracy"]
    values = metrics.compute_metrics(tasks.get_task("stsb"), *SCORES)
    assert list(values) == ["pearson", "spearman"]
    values = metrics.compute_metrics(tasks.get_task("cola"), labels,
                                     predictions)
    assert values["matthews_corr"] == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions))
    with pytest.raises(ValueError, match="2 labels and 1 predictions"):
        metrics.compute_metrics(tasks.get_task("sst2"), [0, 1], [0])
