"""The GLUE tasks: files, columns, labels and official metrics.

Pure Python (no TensorFlow), so that readers and metrics are usable and
testable on every Keras backend.
"""

import dataclasses

from recipes.cli import suggestion


@dataclasses.dataclass(frozen=True)
class Task:
    """One GLUE task as the recipe sees it.

    Attributes:
        name: canonical name used on the command line (`"sst2"`).
        glue_dir: folder name in GLUE's distribution (`"SST-2"`).
        tfds_name: `tensorflow_datasets` name (`"glue/sst2"`), or None.
        text_columns: TSV header names of the one or two text columns.
        tfds_text: `tensorflow_datasets` feature names of the text columns.
        label_column: TSV header name of the label (train/dev files).
        labels: the label strings of the TSV files in class order (the
            order of `tensorflow_datasets`); `None` for regression.
        metrics: official metrics, the first one is the task's main metric.
        eval_splits: `{split: (tsv file, tfds split)}` evaluated on.
        test_splits: `{split: (tsv file, tfds split, submission file)}`.
        headerless: positional `{column: index}` for train/dev files that
            have no header (CoLA), else None.
    """

    name: str
    glue_dir: str
    tfds_name: str
    text_columns: tuple
    tfds_text: tuple
    label_column: str
    labels: tuple
    metrics: tuple
    eval_splits: dict
    test_splits: dict
    headerless: dict = None
    description: str = ""

    @property
    def num_segments(self):
        return len(self.text_columns)

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def num_classes(self):
        return 1 if self.labels is None else len(self.labels)

    @property
    def main_metric(self):
        return self.metrics[0]


def _single(name, glue_dir, tfds, labels, metrics, headerless=None,
            description="", submission=None):
    return Task(
        name=name,
        glue_dir=glue_dir,
        tfds_name=tfds,
        text_columns=("sentence",),
        tfds_text=("sentence",),
        label_column="label",
        labels=labels,
        metrics=metrics,
        eval_splits={"dev": ("dev.tsv", "validation")},
        test_splits={"test": ("test.tsv", "test",
                              submission or f"{glue_dir}.tsv")},
        headerless=headerless,
        description=description,
    )


def _pair(name, glue_dir, tfds, columns, tfds_text, label_column, labels,
          metrics, description=""):
    return Task(
        name=name,
        glue_dir=glue_dir,
        tfds_name=tfds,
        text_columns=columns,
        tfds_text=tfds_text,
        label_column=label_column,
        labels=labels,
        metrics=metrics,
        eval_splits={"dev": ("dev.tsv", "validation")},
        test_splits={"test": ("test.tsv", "test", f"{glue_dir}.tsv")},
        description=description,
    )


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")

TASKS = {
    "cola": _single(
        "cola", "CoLA", "glue/cola", _BINARY, ("matthews_corr", "accuracy"),
        # CoLA's train/dev files have no header:
        # source, label, original label, sentence.
        headerless={"label": 1, "sentence": 3},
        description="linguistic acceptability",
    ),
    "sst2": _single(
        "sst2", "SST-2", "glue/sst2", _BINARY, ("accuracy",),
        description="sentiment (binary)",
    ),
    "mrpc": _pair(
        "mrpc", "MRPC", "glue/mrpc", ("#1 String", "#2 String"),
        ("sentence1", "sentence2"), "Quality", _BINARY, ("f1", "accuracy"),
        description="paraphrase",
    ),
    "qqp": _pair(
        "qqp", "QQP", "glue/qqp", ("question1", "question2"),
        ("question1", "question2"), "is_duplicate", _BINARY,
        ("f1", "accuracy"), description="duplicate questions",
    ),
    "stsb": _pair(
        "stsb", "STS-B", "glue/stsb", ("sentence1", "sentence2"),
        ("sentence1", "sentence2"), "score", None,
        ("pearson", "spearman"), description="similarity (regression 0-5)",
    ),
    "mnli": Task(
        name="mnli",
        glue_dir="MNLI",
        tfds_name="glue/mnli",
        text_columns=("sentence1", "sentence2"),
        tfds_text=("premise", "hypothesis"),
        label_column="gold_label",
        labels=("entailment", "neutral", "contradiction"),
        metrics=("accuracy",),
        eval_splits={
            "dev_matched": ("dev_matched.tsv", "validation_matched"),
            "dev_mismatched": ("dev_mismatched.tsv", "validation_mismatched"),
        },
        test_splits={
            "test_matched": ("test_matched.tsv", "test_matched", "MNLI-m.tsv"),
            "test_mismatched": (
                "test_mismatched.tsv", "test_mismatched", "MNLI-mm.tsv"
            ),
        },
        description="natural language inference (3 classes)",
    ),
    "qnli": _pair(
        "qnli", "QNLI", "glue/qnli", ("question", "sentence"),
        ("question", "sentence"), "label", _NLI2, ("accuracy",),
        description="question answering NLI",
    ),
    "rte": _pair(
        "rte", "RTE", "glue/rte", ("sentence1", "sentence2"),
        ("sentence1", "sentence2"), "label", _NLI2, ("accuracy",),
        description="recognizing textual entailment",
    ),
    "wnli": _pair(
        "wnli", "WNLI", "glue/wnli", ("sentence1", "sentence2"),
        ("sentence1", "sentence2"), "label", _BINARY, ("accuracy",),
        description="Winograd NLI",
    ),
    # A small synthetic sentiment task in SST-2's layout that ships with the
    # package (recipes/glue/data/builtin), for offline runs and tests.
    "builtin": _single(
        "builtin", "builtin", None, _BINARY, ("accuracy",),
        description="built-in tiny sentiment task (SST-2 layout, offline)",
        submission="builtin.tsv",
    ),
}

_ALIASES = {
    "sst-2": "sst2", "sts-b": "stsb", "sts": "stsb", "sst": "sst2",
}

GLUE_TASKS = tuple(name for name in TASKS if name != "builtin")


def get_task(name):
    """Returns the `Task` called `name` (case-insensitive; `SST-2` works).

    Raises:
        ValueError: for an unknown task, listing the known ones.
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        raise ValueError(
            f"Unknown GLUE task {name!r} (argument `--task`). Expected one of "
            f"{', '.join(TASKS)} (GLUE's spellings such as 'SST-2' or "
            "'STS-B' work too)." + suggestion(key, TASKS)
        )
    return TASKS[key]
