"""The recipes on a file system other than the local disk: TensorFlow's
in-memory `ram://`, reached through `tf.io.gfile` as `gs://` is (no local
path; a file opened again for writing is appended to).

The data readers and the command-line checks need TensorFlow installed (for
`tf.io.gfile`), not the TensorFlow backend; a run's files go through
`tf.io.gfile` whatever the backend, so the end-to-end run is checked once,
on TensorFlow.
"""

import gzip
import os
import subprocess
import sys
import uuid

import keras
import numpy as np
import pytest

from recipes import cli
from recipes.core import storage
from recipes.core.storage import join
from recipes.core import vocabulary
from recipes.core.data_files import DataError
from recipes.glue import tasks
from recipes.glue import tsv
from recipes.lm import data as lm_data
from recipes.translate import data as translate_data
from tests.recipes.glue_files import write_glue_task
from tests.recipes.core.tensorflow_only import once

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

requires_tensorflow_backend = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="a run's files go through tf.io.gfile on every backend: checked "
    "once, on TensorFlow")


@pytest.fixture
def ram():
    tf = pytest.importorskip("tensorflow")
    folder = f"ram://test-cloud-{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(folder)
    yield folder
    if tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)


def listdir(path):
    return sorted(name.rstrip("/") for name in
                  storage.gfile().listdir(path))


def copytree(src, dst):
    """Copies the folder `src` into `dst`, file by file (either may be
    local or `ram://`)."""
    gfile = storage.gfile()
    gfile.makedirs(dst)
    for name in listdir(src):
        if gfile.isdir(join(src, name)):
            copytree(join(src, name), join(dst, name))
        else:
            gfile.copy(join(src, name), join(dst, name), overwrite=True)


# ---------------------------------------------------------------- readers


@pytest.mark.parametrize("name", ["sst2", "mrpc", "stsb", "mnli"])
def test_glue_tsv_files_on_ram_read_as_on_disk(ram, tmp_path, name):
    task = tasks.get_task(name)
    write_glue_task(tmp_path, name)
    copytree(str(tmp_path), ram)
    folder = tsv.find_task_dir(ram, task)
    assert folder == f"{ram}/{task.glue_dir}"
    assert tsv.find_task_dir(folder, task) == folder
    local = tsv.read_task_dir(os.path.join(str(tmp_path), task.glue_dir),
                              task)
    remote = tsv.read_task_dir(folder, task)
    assert remote == local  # texts, labels, ids (MRPC: a byte-order mark)
    assert len(remote[0]) > 0 and remote[1]


def test_glue_data_dir_on_ram_without_the_task_lists_what_is_there(ram):
    task = tasks.get_task("sst2")
    storage.write_file(join(ram, "README"), "x")
    with pytest.raises(DataError, match=(
            rf"--data_dir={ram} has no files of task 'sst2'.*"
            rf"{ram}/SST-2/train.tsv.*Found: \['README'\]")):
        tsv.find_task_dir(ram, task)
    with pytest.raises(DataError, match="is not a directory"):
        tsv.find_task_dir(join(ram, "nope"), task)


def test_glue_submission_on_ram(ram):
    task = tasks.get_task("sst2")
    path = join(ram, "submission", "SST-2.tsv")
    for _ in range(2):  # written again by a restarted run: replaced
        tsv.write_submission(path, task, [0, 1], [1, 0])
    assert storage.read_text(path) == "index\tprediction\n0\t1\n1\t0\n"


def test_lm_text_files_on_ram_plain_and_gzip(ram):
    text = "First Citizen:\nBefore we proceed — any further, hear me.\n"
    plain, packed = join(ram, "train.txt"), join(
        ram, "train.txt.gz")
    storage.write_file(plain, text)
    storage.write_file(packed, gzip.compress(text.encode("utf-8")))
    assert lm_data.read_text_file(plain) == text
    assert lm_data.read_text_file(packed) == text
    assert lm_data.load_files({"train": packed, "valid": plain}) == {
        "train": text, "valid": text}
    with pytest.raises(DataError, match=r"Expected the text file at "
                       r"ram://.*/valid.txt; no such file"):
        lm_data.read_text_file(join(ram, "valid.txt"))
    storage.write_file(join(ram, "bad.txt.gz"), b"plain, not gzip")
    with pytest.raises(DataError, match=r"Could not read.*gzip-compressed"):
        lm_data.read_text_file(join(ram, "bad.txt.gz"))
    storage.write_file(join(ram, "empty.txt"), b"")
    with pytest.raises(DataError, match="is empty"):
        lm_data.read_text_file(join(ram, "empty.txt"))


def test_translation_files_on_ram_gzip_recognised_by_content(ram):
    src, tgt = join(ram, "train.de"), join(ram, "train.en")
    storage.write_file(src, gzip.compress("Ein Hund.\r\nZwei.\n".encode()))
    storage.write_file(tgt, "A dog.\nTwo.\n")
    pairs = translate_data.read_parallel(src, tgt)
    assert pairs.src == ["Ein Hund.", "Zwei."]
    assert pairs.tgt == ["A dog.", "Two."]


def test_vocabulary_on_ram(ram):
    path = join(ram, "vocab.txt")
    vocab = list(vocabulary.RESERVED_TOKENS) + ["the", "##s"]
    vocabulary.save_vocabulary(vocab, path)
    assert vocabulary.load_vocabulary(path) == vocab


# ---------------------------------------------------------- command line


def test_input_paths_with_a_scheme_are_checked_with_gfile(ram):
    import argparse

    present = join(ram, "glue")
    storage.gfile().makedirs(present)
    args = argparse.Namespace(data_dir=present, vocab_file=None)
    cli.check_input_paths(args, ["data_dir", "vocab_file"])  # no error
    args.vocab_file = join(ram, "vocab.txt")
    with pytest.raises(ValueError, match=(
            r"Argument `--vocab_file`: no such file or directory: "
            r"'ram://.*/vocab.txt'")):
        cli.check_input_paths(args, ["data_dir", "vocab_file"])
    args.vocab_file = "gcs://bucket/vocab.txt"  # gs:// is the scheme
    with pytest.raises(ValueError, match=(
            r"Argument `--vocab_file`: the file system gcs:// .* is not "
            r"known to tf.io.gfile.*gs://")):
        cli.check_input_paths(args, ["data_dir", "vocab_file"])


@pytest.mark.parametrize("data_dir, model_dir, message", [
    ("ram://no/such/glue", None,
     "Argument `--data_dir`: no such file or directory: 'ram://no/such/glue'"),
    ("nosuch://bucket/glue", None,
     "Argument `--data_dir`: the file system nosuch:// of "
     "'nosuch://bucket/glue' is not known to tf.io.gfile"),
    (None, "gcs://bucket/run",
     "Argument `--model_dir`: the file system gcs:// of 'gcs://bucket/run' "
     "is not known to tf.io.gfile"),
])
@once
def test_a_path_with_a_scheme_is_checked_before_the_run(
        tmp_path, data_dir, model_dir, message):
    pytest.importorskip("tensorflow")
    # In a fresh process: TensorFlow is imported for tf.io.gfile, quietly;
    # the error comes before the strategy, the data and the run directory.
    argv = ["--task=sst2", f"--model_dir={model_dir or tmp_path}"] + (
        [f"--data_dir={data_dir}"] if data_dir else [])
    code = ("import sys; from recipes.glue.train import main; "
            "sys.exit(main(%r))" % argv)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert message in result.stderr


# -------------------------------------------------------------- end to end


class Interrupted(Exception):
    pass


TINY = ["--max_length=24", "--hidden_dim=16", "--num_heads=2",
        "--num_layers=1", "--vocab_size=200", "--batch_size=16",
        "--verbose=0", "--learning_rate=3e-3"]


@requires_tensorflow_backend
def test_builtin_glue_run_on_ram_and_its_resume(ram, tmp_path, monkeypatch):
    import tensorflow as tf

    from recipes.glue import train as train_lib
    from tests.recipes import test_glue_recipe

    run_dir = join(ram, "run")
    argv = ["--task=builtin", "--synthesizer=random", f"--model_dir={run_dir}",
            "--epochs=2", "--max_train_examples=32"] + TINY

    def run(argv):
        return train_lib.run(train_lib.build_parser().parse_args(argv),
                             log=lambda *_: None)

    # 1. Interrupted at the end of epoch 2, before its checkpoint.
    make_eval = train_lib._eval_callback

    def interrupting(*args):
        callback = make_eval(*args)
        on_epoch_end = callback.on_epoch_end

        def stop(epoch, logs=None):
            on_epoch_end(epoch, logs)
            if epoch == 1:
                raise Interrupted()

        callback.on_epoch_end = stop
        return callback

    monkeypatch.setattr(train_lib, "_eval_callback", interrupting)
    with pytest.raises(Interrupted):
        run(argv)
    monkeypatch.setattr(train_lib, "_eval_callback", make_eval)
    assert storage.read_text(join(
        run_dir, "backup", "LATEST")) == "epoch-1\n"
    assert not storage.gfile().exists(join(run_dir, "results.json"))
    # Nothing went to a local folder named `ram:`.
    assert not os.path.exists("ram:")

    # 2. The same command resumes from the checkpoint on ram://.
    results = run(argv)
    assert results["resumed_from_epoch"] == 1
    assert results["optimizer_steps"] == 2 * (32 // 16)  # optimizer kept
    assert [h["epoch"] for h in results["history"]] == [1, 2]
    saved = storage.read_json(join(run_dir, "results.json"))
    assert saved["resumed_from_epoch"] == 1
    assert saved["metrics"]["dev"]["accuracy"] == pytest.approx(
        results["history"][-1]["dev_accuracy"], abs=1e-6)
    assert saved["export"] == f"{run_dir}/export"
    assert sorted(listdir(run_dir)) == [
        "args.json", "attention.png", "backup", "export", "history.csv",
        "logs", "preset", "results.json", "submission", "vocab.txt"]
    assert listdir(join(run_dir, "backup")) == ["LATEST", "epoch-2"]
    assert listdir(join(run_dir, "backup", "epoch-2")) == [
        "history.json", "model.weights.h5", "seeds.json"]
    assert storage.read_bytes(join(run_dir, "attention.png"))[:8] == (
        b"\x89PNG\r\n\x1a\n")
    assert storage.gfile().glob(join(run_dir, "logs", "train", "events.*"))
    lines = storage.read_text(join(
        run_dir, "submission", "builtin.tsv")).splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 301
    history = storage.read_text(join(run_dir, "history.csv"))
    assert len(history.splitlines()) == 3  # header, epochs 1 and 2

    # 3. The SavedModel loads from ram://; a local copy of the run
    # directory holds a complete backup, preset and export that agree.
    assert "serving_default" in tf.saved_model.load(
        join(run_dir, "export")).signatures
    local = str(tmp_path / "copy")
    copytree(run_dir, local)
    texts = [("the film was not good .",), ("the plot is great .",)]
    test_glue_recipe._reload_and_compare(
        local, tasks.get_task("builtin"), argv, texts)

    # 4. Started again after its results: no training, same metrics.
    again = run(argv)
    assert again["resumed_from_epoch"] == 2
    np.testing.assert_allclose(again["metrics"]["dev"]["accuracy"],
                               saved["metrics"]["dev"]["accuracy"])


@requires_tensorflow_backend
def test_attention_plots_on_ram(ram):
    # matplotlib writes local files only: the figure goes through memory.
    from recipes.glue import export as glue_export
    from recipes.lm import model as lm_model

    scores = [np.random.default_rng(0).random((2, 4, 4))]
    for path in (
            lm_model.plot_attention(scores, join(ram, "lm.png"), "lm"),
            glue_export.plot_attention(join(ram, "plots", "glue.png"),
                                       scores, ["a", "b", "c", "d"])):
        assert path.startswith(ram)
        data = storage.read_bytes(path)
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert not os.path.exists("ram:")
