"""The GLUE and SuperGLUE tasks: files, columns, labels and official metrics.

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
        benchmark: `"glue"` (TSV files) or `"superglue"` (JSONL files).
        segments: SuperGLUE: `segments(example) -> tuple of 1 or 2 str`,
            the text segments built from one example's fields (a dict with
            the names of the JSONL files and `tensorflow_datasets`); GLUE:
            None (the text columns are the segments).
        submission_labels: SuperGLUE: the JSON value written for each class
            in the submission file (`"true"`, `"entailment"`, `1`).
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
    benchmark: str = "glue"
    segments: object = None
    submission_labels: tuple = None

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

    @property
    def is_superglue(self):
        return self.benchmark == "superglue"


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

# SuperGLUE (Wang et al. 2019): the tasks that are sentence(-pair)
# classification, read from the released JSONL files or from
# tensorflow_datasets' super_glue/<config>. Each example's fields become one
# or two text segments (`Task.segments`). MultiRC and ReCoRD are not here:
# MultiRC scores groups of answers per question (F1a, exact match) and
# ReCoRD picks an entity span (F1, exact match); neither is one label per
# example.


def _passage_question(example):
    """BoolQ: the passage, then the yes/no question."""
    return (example["passage"], example["question"])


def _premise_hypothesis(example):
    """CB and RTE: premise, hypothesis."""
    return (example["premise"], example["hypothesis"])


def _wic(example):
    """WiC: `"word: sentence1"`, `sentence2` (does `word` mean the same in
    both sentences?)."""
    return (f"{example['word']}: {example['sentence1']}",
            example["sentence2"])


COPA_QUESTIONS = {"cause": "What was the cause?",
                  "effect": "What happened as a result?"}


def _copa(example):
    """COPA as one pair classified 0 (choice1) or 1 (choice2): `"premise
    What was the cause?"` (or `What happened as a result?`), `"choice1 ||
    choice2"`. Not the paper's setup (which scores each alternative)."""
    question = example["question"]
    asked = COPA_QUESTIONS.get(question, f"What was the {question}?")
    return (f"{example['premise']} {asked}",
            f"{example['choice1']} || {example['choice2']}")


def _span_words(text):
    return len(str(text).split()) or 1


def _wsc(example):
    """WSC: one segment, the text with the candidate (span1) marked
    `[ ... ]` and the pronoun (span2) marked `* ... *`: is the starred
    pronoun the bracketed phrase? A span starts at its word index
    (`text.split()`) and covers as many words as its span text, up to the
    end of the text.

    Raises:
        ValueError: a span index outside the text.
    """
    words = str(example["text"]).split()
    opening = [""] * len(words)
    closing = [""] * len(words)
    for span, (left, right) in (("span1", ("[ ", " ]")),
                                ("span2", ("* ", " *"))):
        start = int(example[f"{span}_index"])
        if not 0 <= start < len(words):
            raise ValueError(
                f"{span}_index={start} is outside the text's {len(words)} "
                f"words (expected 0 to {len(words) - 1}).")
        end = min(len(words), start + _span_words(example[f"{span}_text"]))
        opening[start] += left
        closing[end - 1] = right + closing[end - 1]
    return (" ".join(o + w + c for o, w, c in zip(opening, words, closing)),)


_BOOL = ("False", "True")  # tensorflow_datasets' class order
_BOOL_SUBMISSION = ("false", "true")


def _superglue(name, folder, segments, text_columns, tfds_fields, labels,
               metrics, description, tfds_config=None,
               submission_labels=None):
    return Task(
        name=name,
        glue_dir=folder,
        tfds_name=f"super_glue/{tfds_config or name}",
        text_columns=text_columns,
        tfds_text=tfds_fields,
        label_column="label",
        labels=labels,
        metrics=metrics,
        eval_splits={"dev": ("val.jsonl", "validation")},
        test_splits={"test": ("test.jsonl", "test", f"{folder}.jsonl")},
        description=description,
        benchmark="superglue",
        segments=segments,
        submission_labels=submission_labels or labels,
    )


_NLI3 = ("entailment", "contradiction", "neutral")  # tfds' order

SUPERGLUE = {
    "boolq": _superglue(
        "boolq", "BoolQ", _passage_question, ("passage", "question"),
        ("passage", "question"), _BOOL, ("accuracy",),
        "SuperGLUE: yes/no questions about a passage",
        submission_labels=_BOOL_SUBMISSION),
    "cb": _superglue(
        "cb", "CB", _premise_hypothesis, ("premise", "hypothesis"),
        ("premise", "hypothesis"), _NLI3,
        ("acc_and_f1", "accuracy", "macro_f1"),
        "SuperGLUE: CommitmentBank, 3-class NLI"),
    "copa": _superglue(
        "copa", "COPA", _copa, ("premise_question", "choices"),
        ("premise", "choice1", "choice2", "question"),
        ("choice1", "choice2"), ("accuracy",),
        "SuperGLUE: choice of plausible alternatives (as one pair)",
        submission_labels=(0, 1)),
    "superglue_rte": _superglue(
        "superglue_rte", "RTE", _premise_hypothesis,
        ("premise", "hypothesis"), ("premise", "hypothesis"), _NLI2,
        ("accuracy",), "SuperGLUE: recognizing textual entailment",
        tfds_config="rte"),
    "wic": _superglue(
        "wic", "WiC", _wic, ("word_sentence1", "sentence2"),
        ("word", "sentence1", "sentence2"), _BOOL, ("accuracy",),
        "SuperGLUE: word in context", submission_labels=_BOOL_SUBMISSION),
    "wsc": _superglue(
        "wsc", "WSC", _wsc, ("marked_text",),
        ("text", "span1_index", "span2_index", "span1_text", "span2_text"),
        _BOOL, ("accuracy",), "SuperGLUE: Winograd schema coreference",
        tfds_config="wsc.fixed", submission_labels=_BOOL_SUBMISSION),
}
SUPERGLUE_TASKS = tuple(SUPERGLUE)
TASKS.update(SUPERGLUE)


_ALIASES = {
    "sst-2": "sst2", "sts-b": "stsb", "sts": "stsb", "sst": "sst2",
}

GLUE_TASKS = tuple(name for name in TASKS
                   if name != "builtin" and name not in SUPERGLUE)
_NOT_SUPPORTED = {
    "multirc": "MultiRC scores every answer of a question and reports F1a "
    "and exact match over questions",
    "record": "ReCoRD picks an entity span of the passage (F1, exact "
    "match)",
}


def _canonical(key):
    """SuperGLUE's spellings (`super_glue/rte`, `superglue-wic`, `WiC`)."""
    for prefix in ("super_glue/", "superglue/", "superglue_", "superglue-",
                   "super_glue_"):
        if key.startswith(prefix):
            rest = key[len(prefix):]
            if rest == "wsc.fixed":
                rest = "wsc"
            return "superglue_rte" if rest == "rte" else rest
    return key


def get_task(name):
    """Returns the `Task` called `name` (case-insensitive; `SST-2` works,
    and SuperGLUE's `super_glue/cb`: `super_glue/rte` is `superglue_rte`).

    Raises:
        ValueError: for an unknown task, listing the known ones.
    """
    key = _canonical(str(name).strip().lower())
    key = _ALIASES.get(key, key)
    if key in _NOT_SUPPORTED:
        raise ValueError(
            f"SuperGLUE's {name!r} (argument `--task`) is not supported: "
            f"{_NOT_SUPPORTED[key]}, not one label per example. Expected one "
            f"of the SuperGLUE tasks {', '.join(SUPERGLUE_TASKS)}.")
    if key not in TASKS:
        raise ValueError(
            f"Unknown GLUE task {name!r} (argument `--task`). Expected one of "
            f"{', '.join(TASKS)} (GLUE's spellings such as 'SST-2' or "
            "'STS-B' work too; SuperGLUE's RTE is 'superglue_rte', 'rte' "
            "being GLUE's)." + suggestion(key, TASKS)
        )
    return TASKS[key]
