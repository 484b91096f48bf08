"""GLUE task table, TSV readers and submission files (pure Python: every
Keras backend)."""

import os

import pytest

from recipes.core.data_files import DataError
from recipes.glue import loading, tasks, tsv
from tests.recipes.glue_files import GLUE_FILES, write_glue_task

# task: (first train texts, train labels, eval splits and their labels,
#        test splits and their ids)
EXPECTED = {
    "cola": (
        ("Our friends won't buy this analysis, let alone the next one we "
         "propose.",),
        [1, 0, 1], {"dev": [1, 0]}, {"test": ["0", "1"]},
    ),
    "sst2": (
        ("hide new secretions from the parental units ",),
        [0, 1, 0], {"dev": [1, 0]}, {"test": ["0", "1"]},
    ),
    "mrpc": (
        ("Amrozi accused his brother , whom he called \" the witness \" .",
         "Referring to him as only \" the witness \" , Amrozi accused his "
         "brother ."),
        [1, 0], {"dev": [1, 0]}, {"test": ["0"]},
    ),
    "qqp": (
        ("How is the life of a math student?",
         "Which level of prepration is enough?"),
        [0, 1], {"dev": [0, 1]}, {"test": ["0"]},
    ),
    "stsb": (
        ("A plane is taking off.", "An air plane is taking off."),
        [5.0, 3.8], {"dev": [5.0, 4.75]}, {"test": ["0"]},
    ),
    "mnli": (
        ("Conceptually cream skimming has two basic dimensions.",
         "Product and geography are what make cream skimming work. "),
        # entailment 0, neutral 1, contradiction 2 (tensorflow_datasets).
        [1, 0, 2], {"dev_matched": [1], "dev_mismatched": [2]},
        {"test_matched": ["0"]},
    ),
    "qnli": (
        ("When did the third Digimon series begin?",
         "Unlike the two seasons before it, it was darker."),
        [1, 0], {"dev": [0]}, {"test": ["0"]},
    ),
    "rte": (
        ("No Weapons of Mass Destruction Found in Iraq Yet.",
         "Weapons of Mass Destruction Found in Iraq."),
        [1, 0], {"dev": [1]}, {"test": ["0"]},
    ),
    "wnli": (
        ("I stuck a pin through a carrot.", "The carrot had a hole."),
        [1, 0], {"dev": [1]}, {"test": ["0"]},
    ),
}


def test_every_glue_task_has_a_fixture():
    assert set(GLUE_FILES) == set(tasks.GLUE_TASKS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_read_task_dir_in_glue_layout(tmp_path, name):
    task = tasks.get_task(name)
    write_glue_task(tmp_path, name)
    folder = tsv.find_task_dir(str(tmp_path), task)
    assert folder == os.path.join(str(tmp_path), task.glue_dir)
    # The task folder itself works as --data_dir too.
    assert tsv.find_task_dir(folder, task) == folder
    train, evals, tests = tsv.read_task_dir(folder, task)
    first, labels, eval_labels, test_ids = EXPECTED[name]
    assert train.texts[0] == first
    assert all(len(t) == task.num_segments for t in train.texts)
    assert train.labels == labels
    assert {k: v.labels for k, v in evals.items()} == eval_labels
    assert {k: v.ids for k, v in tests.items()} == test_ids
    assert all(v.labels is None for v in tests.values())


def test_quotes_are_text_not_csv_quoting(tmp_path):
    # GLUE's files are not quoted: an unbalanced quote is a character.
    task = tasks.get_task("cola")
    write_glue_task(tmp_path, "cola")
    train, _, _ = tsv.read_task_dir(os.path.join(tmp_path, "CoLA"), task)
    assert train.texts[1] == (
        'The more we study verbs, the crazier they get "quoted.',)
    assert len(train) == 3


def test_mrpc_byte_order_mark_is_ignored(tmp_path):
    task = tasks.get_task("mrpc")
    write_glue_task(tmp_path, "mrpc")
    train = tsv.read_tsv(os.path.join(tmp_path, "MRPC", "train.tsv"), task)
    assert train.labels == [1, 0]


@pytest.mark.parametrize(
    "alias, name",
    [("SST-2", "sst2"), ("sst2", "sst2"), ("STS-B", "stsb"),
     ("MNLI", "mnli"), ("CoLA", "cola"), ("builtin", "builtin")],
)
def test_task_aliases(alias, name):
    assert tasks.get_task(alias).name == name


def test_task_table():
    assert tasks.get_task("mnli").num_classes == 3
    assert tasks.get_task("stsb").is_regression
    assert tasks.get_task("stsb").metrics == ("pearson", "spearman")
    assert tasks.get_task("cola").main_metric == "matthews_corr"
    assert tasks.get_task("mrpc").metrics == ("f1", "accuracy")
    assert tasks.get_task("qqp").metrics == ("f1", "accuracy")
    assert tasks.get_task("rte").num_segments == 2
    assert tasks.get_task("sst2").num_segments == 1


def test_unknown_task():
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'sst3'.*--task"):
        tasks.get_task("sst3")


def test_data_dir_without_the_task(tmp_path):
    write_glue_task(tmp_path, "rte")
    with pytest.raises(DataError, match=r"no files of task 'sst2'.*"
                       r"SST-2.train\.tsv"):
        tsv.find_task_dir(str(tmp_path), tasks.get_task("sst2"))


def test_data_dir_missing(tmp_path):
    with pytest.raises(DataError, match="is not a directory"):
        tsv.find_task_dir(str(tmp_path / "nope"), tasks.get_task("sst2"))


def test_missing_dev_file(tmp_path):
    task = tasks.get_task("mnli")
    files = dict(GLUE_FILES["mnli"][1])
    del files["dev_mismatched.tsv"]
    folder = write_glue_task(tmp_path, "mnli", files)
    with pytest.raises(DataError, match=r"dev_mismatched\.tsv not found"):
        tsv.read_task_dir(folder, task)


def test_test_split_is_optional(tmp_path):
    task = tasks.get_task("sst2")
    files = dict(GLUE_FILES["sst2"][1])
    del files["test.tsv"]
    folder = write_glue_task(tmp_path, "sst2", files)
    _, evals, tests = tsv.read_task_dir(folder, task)
    assert tests == {} and list(evals) == ["dev"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("sst2", "sentence\tlabel\ngood\t1\nbad\t0\textra\n",
         r"line 3: expected 2 tab-separated fields"),
        ("sst2", "text\tlabel\ngood\t1\n",
         r"no column\(s\) \['sentence'\]"),
        ("sst2", "sentence\tlabel\ngood\tpositive\n",
         r"line 2: unknown label 'positive'.*\['0', '1'\]"),
        ("stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
         "\tsentence1\tsentence2\tscore\n0\ta\tb\tc\td\te\tf\tx\ty\thigh\n",
         r"expected a numeric score"),
        ("cola", "gj04\t1\tonly three\n", r"expected 4 tab-separated"),
        ("sst2", "", r"is empty"),
        ("sst2", "sentence\tlabel\n", r"has no examples"),
    ],
)
def test_malformed_files(tmp_path, name, content, message):
    task = tasks.get_task(name)
    path = tmp_path / "train.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        tsv.read_tsv(str(path), task)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="Data file not found"):
        tsv.read_tsv(str(tmp_path / "train.tsv"), tasks.get_task("sst2"))


@pytest.mark.parametrize(
    "name, predictions, expected",
    [
        ("sst2", [1, 0], ["1", "0"]),
        ("mnli", [0, 2], ["entailment", "contradiction"]),
        ("rte", [1, 0], ["not_entailment", "entailment"]),
        ("stsb", [5.7, 2.12345], ["5.000", "2.123"]),
    ],
)
def test_write_submission(tmp_path, name, predictions, expected):
    path = tmp_path / "sub" / "out.tsv"
    tsv.write_submission(str(path), tasks.get_task(name), ["7", "9"],
                         predictions)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == ["index\tprediction", f"7\t{expected[0]}",
                     f"9\t{expected[1]}"]


def test_builtin_task_ships_with_the_package():
    task = tasks.get_task("builtin")
    train, evals, tests = loading.load_task_data(task)
    assert len(train) == 2400 and len(evals["dev"]) == 300
    assert len(tests["test"]) == 300
    assert set(train.labels) == {0, 1}
    # Balanced enough that accuracy means something.
    assert 0.4 < sum(train.labels) / len(train) < 0.6
    with pytest.raises(ValueError, match="--task=builtin"):
        loading.load_task_data(task, data_dir="somewhere")


def test_subsample():
    split = tsv.Split(texts=[("a",), ("b",), ("c",)], labels=[0, 1, 0],
                      ids=[0, 1, 2])
    small = loading.subsample(split, 2)
    assert small.texts == [("a",), ("b",)] and small.labels == [0, 1]
    assert loading.subsample(split, None) is split
