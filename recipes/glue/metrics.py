"""GLUE's and SuperGLUE's official metrics, from scikit-learn and SciPy."""

import numpy as np


def accuracy(labels, predictions):
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(labels, predictions))


def f1(labels, predictions):
    """Binary F1 of the positive class 1 (MRPC, QQP); 0 without positives."""
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predictions, pos_label=1,
                          zero_division=0.0))


def matthews_corr(labels, predictions):
    """Matthews correlation coefficient (CoLA), multiclass form."""
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(labels, predictions))


def _correlation(statistic, labels, predictions):
    """`statistic(labels, predictions)`'s coefficient; 0 where either side
    is constant (SciPy's NaN: no correlation is defined)."""
    x = np.asarray(labels, dtype=np.float64)
    y = np.asarray(predictions, dtype=np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(statistic(x, y)[0])


def pearson(labels, predictions):
    from scipy.stats import pearsonr

    return _correlation(pearsonr, labels, predictions)


def spearman(labels, predictions):
    """Spearman's rank correlation (ties get their average rank)."""
    from scipy.stats import spearmanr

    return _correlation(spearmanr, labels, predictions)


def macro_f1(labels, predictions, num_classes=None):
    """F1 averaged over the classes, unweighted (SuperGLUE's CB): each of
    `range(num_classes)` counts, a class never labelled nor predicted with
    F1 0 (default: the classes seen in labels or predictions)."""
    from sklearn.metrics import f1_score

    classes = (list(range(num_classes)) if num_classes
               else sorted(set(labels) | set(predictions)))
    return float(f1_score(labels, predictions, labels=classes,
                          average="macro", zero_division=0.0))


def acc_and_f1(labels, predictions, num_classes=None):
    """SuperGLUE's CB score: the mean of accuracy and `macro_f1`."""
    return (accuracy(labels, predictions)
            + macro_f1(labels, predictions, num_classes)) / 2


# Metrics that take the task's number of classes.
_PER_CLASS = ("macro_f1", "acc_and_f1")

METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corr": matthews_corr,
    "pearson": pearson,
    "spearman": spearman,
    "macro_f1": macro_f1,
    "acc_and_f1": acc_and_f1,
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
    return {name: METRICS[name](labels, predictions,
                                **({"num_classes": task.num_classes}
                                   if name in _PER_CLASS else {}))
            for name in task.metrics}
