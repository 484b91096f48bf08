"""GLUE's official metrics in NumPy (no TensorFlow, no scikit-learn)."""

import numpy as np


def accuracy(labels, predictions):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions):
    """Binary F1 of the positive class 1 (MRPC, QQP)."""
    labels = np.asarray(labels) == 1
    predictions = np.asarray(predictions) == 1
    tp = np.sum(labels & predictions)
    fp = np.sum(~labels & predictions)
    fn = np.sum(labels & ~predictions)
    if tp == 0:
        return 0.0
    return float(2 * tp / (2 * tp + fp + fn))


def matthews_corr(labels, predictions):
    """Matthews correlation coefficient (CoLA), multiclass form."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for t, p in zip(labels, predictions):
        confusion[index[t], index[p]] += 1
    t_sum = confusion.sum(axis=1)
    p_sum = confusion.sum(axis=0)
    n = confusion.sum()
    correct = np.trace(confusion)
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(labels, predictions):
    x = np.asarray(labels, dtype=np.float64)
    y = np.asarray(predictions, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return 0.0 if denominator == 0 else float(np.sum(x * y) / denominator)


def _ranks(values):
    """Ranks starting at 1, ties get their average rank."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(labels, predictions):
    return pearson(_ranks(labels), _ranks(predictions))


METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corr": matthews_corr,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_metrics(task, labels, predictions):
    """Returns `{metric: value}` for `task`'s official metrics.

    Args:
        task: a `Task`.
        labels: gold class indices (or scores for regression).
        predictions: predicted class indices (or scores).
    """
    if len(labels) != len(predictions):
        raise ValueError(
            f"Got {len(labels)} labels and {len(predictions)} predictions; "
            "expected as many predictions as labels."
        )
    return {name: METRICS[name](labels, predictions) for name in task.metrics}
