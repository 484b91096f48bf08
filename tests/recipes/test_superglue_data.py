"""SuperGLUE tasks of the GLUE recipe: the task table, segments, JSONL
readers and submission files (pure Python: every Keras backend)."""

import json
import os

import pytest

from recipes.core.data_files import DataError
from recipes.glue import jsonl, loading, tasks
from tests.recipes.superglue_files import (SUPERGLUE_FILES, jsonl_text,
                                           write_superglue_task)

# task: (first train segments, train labels, dev labels, test ids)
EXPECTED = {
    "boolq": (
        ("Persian language -- Persian is a language.",
         "do iran and afghanistan speak the same language"),
        [1, 0], [0], [0],
    ),
    # tensorflow_datasets' order: entailment, contradiction, neutral.
    "cb": (
        ("It was a complex language.", "the language was peeled down"),
        [1, 0, 2], [0], [0],
    ),
    "copa": (
        ("My body cast a shadow over the grass. What was the cause?",
         "The sun was rising. || The grass was cut."),
        [0, 0, 1], [1], [0],
    ),
    "superglue_rte": (
        ("No Weapons of Mass Destruction Found in Iraq Yet.",
         "Weapons of Mass Destruction Found in Iraq."),
        [1, 0], [1], [0],
    ),
    "wic": (
        ("place: Do you want to come over to my place later?",
         "A political system with no place for the less prominent groups."),
        [0, 1], [0], [0],
    ),
    "wsc": (
        ("[ Mark ] told Pete many lies about himself, which Pete included "
         "in his book. * He * should have been more skeptical.",),
        [0, 0], [1], [0],
    ),
}


def test_every_superglue_task_has_a_fixture():
    assert set(SUPERGLUE_FILES) == set(tasks.SUPERGLUE_TASKS) == set(
        EXPECTED)
    assert not set(tasks.SUPERGLUE_TASKS) & set(tasks.GLUE_TASKS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_read_jsonl_task_dir(tmp_path, name):
    task = tasks.get_task(name)
    folder = write_superglue_task(tmp_path, name)
    assert jsonl.find_task_dir(str(tmp_path), task) == folder
    assert jsonl.find_task_dir(folder, task) == folder
    train, evals, tests = loading.load_task_data(task, data_dir=str(tmp_path))
    first, labels, dev_labels, test_ids = EXPECTED[name]
    assert train.texts[0] == first
    assert all(len(t) == task.num_segments for t in train.texts)
    assert train.labels == labels
    assert train.ids == list(range(len(labels)))
    assert list(evals) == ["dev"] and evals["dev"].labels == dev_labels
    assert list(tests) == ["test"] and tests["test"].labels is None
    assert tests["test"].ids == test_ids


def test_task_table():
    cb = tasks.get_task("cb")
    assert cb.num_classes == 3 and cb.main_metric == "acc_and_f1"
    assert cb.metrics == ("acc_and_f1", "accuracy", "macro_f1")
    for name in ("boolq", "copa", "superglue_rte", "wic", "wsc"):
        assert tasks.get_task(name).metrics == ("accuracy",)
        assert tasks.get_task(name).num_classes == 2
    assert tasks.get_task("wsc").num_segments == 1
    assert tasks.get_task("wsc").tfds_name == "super_glue/wsc.fixed"
    assert tasks.get_task("superglue_rte").tfds_name == "super_glue/rte"
    assert tasks.get_task("rte").tfds_name == "glue/rte"  # GLUE's
    assert all(tasks.get_task(n).is_superglue for n in tasks.SUPERGLUE_TASKS)
    assert not any(tasks.get_task(n).is_superglue for n in tasks.GLUE_TASKS)


@pytest.mark.parametrize("alias, name", [
    ("super_glue/rte", "superglue_rte"), ("SuperGLUE-RTE", "superglue_rte"),
    ("super_glue/wsc.fixed", "wsc"), ("WiC", "wic"), ("BoolQ", "boolq"),
    ("super_glue/cb", "cb"), ("COPA", "copa"), ("RTE", "rte"),
])
def test_task_names(alias, name):
    assert tasks.get_task(alias).name == name


@pytest.mark.parametrize("name, message", [
    ("multirc", r"SuperGLUE's 'multirc' \(argument `--task`\) is not "
     r"supported: MultiRC .*Expected one of the SuperGLUE tasks boolq"),
    ("super_glue/record", r"'super_glue/record'.*not supported: ReCoRD"),
    ("rtee", r"Unknown GLUE task 'rtee'.*SuperGLUE's RTE is "
     r"'superglue_rte'.*Did you mean 'rte'"),
])
def test_task_name_errors(name, message):
    with pytest.raises(ValueError, match=message):
        tasks.get_task(name)


def test_wsc_marks_the_spans():
    segments = tasks.get_task("wsc").segments
    # Multi-word span1; span2 at the end of the text.
    assert segments({"text": "The big dog ate it", "span1_index": 0,
                     "span1_text": "The big dog", "span2_index": 4,
                     "span2_text": "it"}) == ("[ The big dog ] ate * it *",)
    # A span text longer than the rest of the text ends with the text.
    assert segments({"text": "I saw him", "span1_index": 0,
                     "span1_text": "I", "span2_index": 2,
                     "span2_text": "him and more"}) == ("[ I ] saw * him *",)
    with pytest.raises(ValueError, match=r"span2_index=5 is outside the "
                       r"text's 3 words \(expected 0 to 2\)"):
        segments({"text": "I saw him", "span1_index": 0, "span1_text": "I",
                  "span2_index": 5, "span2_text": "him"})


def test_copa_and_wic_segments():
    copa = tasks.get_task("copa").segments
    example = {"premise": "The man fell.", "choice1": "He slipped.",
               "choice2": "He laughed.", "question": "cause"}
    assert copa(example) == ("The man fell. What was the cause?",
                             "He slipped. || He laughed.")
    assert copa({**example, "question": "effect"})[0] == (
        "The man fell. What happened as a result?")
    wic = tasks.get_task("wic").segments
    assert wic({"word": "bank", "sentence1": "A river bank.",
                "sentence2": "A bank loan."}) == ("bank: A river bank.",
                                                  "A bank loan.")


@pytest.mark.parametrize("name, lines, message", [
    ("boolq", ['{"question": "q", "passage": "p", "label": true}', "{oops"],
     r"line 2: not valid JSON .*SuperGLUE's BoolQ JSONL"),
    ("boolq", ['["q", "p"]'], r"line 1: expected a JSON object, found list"),
    ("cb", ['{"premise": "p", "hypothesis": "h", "label": "maybe"}'],
     r"line 1: unknown label 'maybe' for task 'cb'; expected one of "
     r"\['entailment', 'contradiction', 'neutral'\]"),
    ("copa", ['{"premise": "p", "choice1": "a", "choice2": "b", '
              '"question": "cause", "label": 2}'],
     r"line 1: unknown label 2 for task 'copa'"),
    ("wic", ['', '{"word": "w", "sentence1": "s", "label": true}'],
     r"line 2: no field\(s\) \['sentence2'\]; expected SuperGLUE's WiC "
     r"fields"),
    ("superglue_rte", ['{"premise": "p", "hypothesis": "h"}'],
     r"line 1: no 'label'"),
    ("wsc", ['{"text": "a b", "target": {"span1_index": 0, "span1_text": '
             '"a", "span2_index": 9, "span2_text": "b"}, "label": true}'],
     r"line 1: span2_index=9 is outside the text's 2 words.*task 'wsc'"),
    ("boolq", [], r"has no examples"),
])
def test_malformed_jsonl(tmp_path, name, lines, message):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        jsonl.read_jsonl(str(path), tasks.get_task(name))
    assert str(path) in str(info.value)


def test_missing_files_and_the_other_benchmark(tmp_path):
    with pytest.raises(DataError, match="Data file not found"):
        jsonl.read_jsonl(str(tmp_path / "x.jsonl"), tasks.get_task("cb"))
    folder = write_superglue_task(tmp_path, "superglue_rte")
    # GLUE's rte on SuperGLUE's files (and the converse) names the task.
    with pytest.raises(DataError, match=r"no files of task 'rte'.*"
                       r"SuperGLUE's RTE is --task=superglue_rte"):
        loading.load_task_data(tasks.get_task("rte"), data_dir=folder)
    glue_rte = tmp_path / "glue"
    glue_rte.mkdir()
    (glue_rte / "train.tsv").write_text("x\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no files of task 'superglue_rte'"
                       r".*GLUE's RTE is --task=rte"):
        loading.load_task_data(tasks.get_task("superglue_rte"),
                               data_dir=str(glue_rte))
    os.remove(os.path.join(folder, "val.jsonl"))
    with pytest.raises(DataError, match=r"evaluation file .*val\.jsonl not "
                       "found"):
        jsonl.read_task_dir(folder, tasks.get_task("superglue_rte"))


@pytest.mark.parametrize("name, predictions, expected", [
    ("boolq", [1, 0], ["true", "false"]),
    ("cb", [2, 1], ["neutral", "contradiction"]),
    ("copa", [1, 0], [1, 0]),
    ("superglue_rte", [0, 1], ["entailment", "not_entailment"]),
    ("wic", [0, 1], ["false", "true"]),
    ("wsc", [1, 1], ["true", "true"]),
])
def test_write_submission(tmp_path, name, predictions, expected):
    task = tasks.get_task(name)
    path = tmp_path / "submission" / task.test_splits["test"][2]
    jsonl.write_submission(str(path), task, [3, 7], predictions)
    assert path.name == f"{task.glue_dir}.jsonl"
    lines = [json.loads(line)
             for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"idx": 3, "label": expected[0]},
                     {"idx": 7, "label": expected[1]}]


def test_jsonl_text_round_trip(tmp_path):
    # A byte-order mark and blank lines are tolerated.
    path = tmp_path / "val.jsonl"
    examples = SUPERGLUE_FILES["cb"][1]["train.jsonl"]
    path.write_text("\ufeff" + jsonl_text(examples) + "\n\n",
                    encoding="utf-8")
    split = jsonl.read_jsonl(str(path), tasks.get_task("cb"))
    assert len(split) == 3 and split.labels == [1, 0, 2]
