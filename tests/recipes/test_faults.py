"""Training under faults: SIGKILL mid-epoch, atomic backups and exports.

The atomic writer and the history repair are pure Python and run on every
backend; the tests that train or save Keras weights need the recipes'
TensorFlow backend and skip on the others.
"""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from recipes.core import callbacks as callbacks_lib
from recipes.core import run_directory
from recipes.core import training

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the recipes train with tf.data/tf.distribute and run on the "
    "TensorFlow backend only; the atomic writer and history repair are "
    "tested on every backend",
)


class Killed(Exception):
    """Stands for a kill in the middle of a write."""


# ------------------------------------------------------------ atomic writes


def test_atomic_write_failure_keeps_the_previous_file(tmp_path):
    path = str(tmp_path / "state.json")
    run_directory.write_json(path, {"epoch": 1})

    def half_written(tmp):
        with open(tmp, "w") as f:
            f.write('{"epo')
        raise Killed()

    with pytest.raises(Killed):
        run_directory.atomic_write(path, half_written)
    assert run_directory.read_json(path) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["state.json"]  # no temporary left

    # A first write that fails leaves no file at all.
    new = str(tmp_path / "results.json")
    with pytest.raises(Killed):
        run_directory.atomic_write(new, half_written)
    assert not os.path.exists(new)


def test_atomic_write_of_a_folder_replaces_it_whole(tmp_path):
    path = str(tmp_path / "export")

    def write_folder(content, fail=False):
        def write(tmp):
            os.makedirs(os.path.join(tmp, "variables"))
            with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
                f.write(content)
            if fail:
                raise Killed()
        return write

    run_directory.atomic_write(path, write_folder("one"))
    with pytest.raises(Killed):
        run_directory.atomic_write(path, write_folder("two", fail=True))
    assert open(os.path.join(path, "saved_model.pb")).read() == "one"
    assert sorted(os.listdir(tmp_path)) == ["export"]
    run_directory.atomic_write(path, write_folder("three"))
    assert open(os.path.join(path, "saved_model.pb")).read() == "three"
    assert sorted(os.listdir(tmp_path)) == ["export"]


def test_restart_removes_what_a_killed_write_left(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    # What SIGKILL leaves (no `except` runs): temporaries of another pid.
    leftovers = [run_dir.path(".tmp-99-results.json"),
                 run_dir.path(".tmp-99-history.csv")]
    for leftover in leftovers:
        with open(leftover, "w") as f:
            f.write("half")
    os.makedirs(run_dir.path(".tmp-99-backup"))
    with open(run_dir.path(".tmp-99-backup", "latest.weights.h5"), "w") as f:
        f.write("half")
    run_directory.RunDirectory(str(tmp_path), {"a": 1})
    assert sorted(os.listdir(tmp_path)) == ["args.json"]
    assert run_directory.temporary_path(
        run_dir.path("model.weights.h5")).endswith(".weights.h5")


# Writes `path` as a folder holding `saved_model.pb` = `content` with
# `run_directory.atomic_write`, and SIGKILLs itself at `kill_point`:
# while writing, after the first rename (the previous folder moved aside) or
# after the second (the new folder in place, the previous one not yet removed).
_KILLED_FOLDER_WRITE = """
import os, signal, sys
from recipes.core import run_directory

path, content, kill_point = sys.argv[1:]
renames = []
replace = os.replace

def replace_then_maybe_die(src, dst):
    replace(src, dst)
    renames.append(dst)
    if kill_point == f"after rename {len(renames)}":
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace_then_maybe_die

def write(tmp):
    os.makedirs(os.path.join(tmp, "variables"))
    with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
        f.write(content)
    if kill_point == "while writing":
        os.kill(os.getpid(), signal.SIGKILL)

run_directory.atomic_write(path, write)
"""


@pytest.mark.parametrize("kill_point,recovered", [
    ("while writing", "one"),
    ("after rename 1", "two"),  # between the two renames
    ("after rename 2", "two"),
])
def test_sigkill_while_replacing_an_export_folder_recovers(
        tmp_path, kill_point, recovered):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    export = run_dir.path("export")
    run_directory.atomic_write(export, lambda tmp: (
        os.makedirs(os.path.join(tmp, "variables")),
        open(os.path.join(tmp, "saved_model.pb"), "w").write("one")))
    env = dict(os.environ, PYTHONPATH=REPO)
    process = subprocess.run(
        [sys.executable, "-c", _KILLED_FOLDER_WRITE, export, "two",
         kill_point], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120)
    assert process.returncode == -signal.SIGKILL, process.stderr[-2000:]
    left = sorted(os.listdir(tmp_path))
    if kill_point == "after rename 1":
        # Killed between the renames: no export, both versions aside.
        assert "export" not in left, left
        assert len([n for n in left
                    if n.startswith(run_directory.TMP_PREFIX)]) == 2
    else:
        assert "export" in left, left

    # A restart (same arguments) finds the complete export.
    run_directory.RunDirectory(str(tmp_path), {"a": 1})
    assert sorted(os.listdir(tmp_path)) == ["args.json", "export"]
    assert sorted(os.listdir(export)) == ["saved_model.pb", "variables"]
    with open(os.path.join(export, "saved_model.pb")) as f:
        assert f.read() == recovered


def test_a_failed_second_rename_puts_the_previous_folder_back(tmp_path,
                                                              monkeypatch):
    path = str(tmp_path / "export")
    run_directory.atomic_write(path, lambda tmp: os.makedirs(
        os.path.join(tmp, "one")))
    replace = os.replace
    failures = []

    def second_rename_fails(src, dst):  # the new folder to `path`, once
        if os.path.abspath(dst) == path and not failures:
            failures.append(src)
            raise OSError("disk full")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="disk full"):
        run_directory.atomic_write(path, lambda tmp: os.makedirs(
            os.path.join(tmp, "two")))
    assert len(failures) == 1 and not os.path.isdir(failures[0])
    assert os.listdir(tmp_path) == ["export"]
    assert os.listdir(path) == ["one"]


def test_history_keeps_one_row_per_backed_up_epoch(tmp_path):
    # CSVLogger's rows (epochs from 0): killed after logging epoch 2 (twice
    # over two earlier kills) and half of epoch 3, with epoch 1 the last
    # backup.
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    os.makedirs(run_dir.backup_dir)
    with open(os.path.join(run_dir.backup_dir, "training_metadata.json"),
              "w") as f:
        json.dump({"epoch": 1, "batch": 0}, f)
    with open(run_dir.history_path, "w") as f:
        f.write("epoch,loss\n0,0.5\n1,0.4\n1,0.4\n2,0.")
    assert run_dir.resume() == 1
    assert run_dir.history() == [{"epoch": 1, "loss": 0.5}]
    with open(run_dir.history_path) as f:
        assert f.read().splitlines() == ["epoch,loss", "0,0.5"]
    # A half-written row is left out when reading, too.
    with open(run_dir.history_path, "a") as f:
        f.write("1,0.")
    assert run_dir.history() == [{"epoch": 1, "loss": 0.5}]


# ------------------------------------------------------------ Keras backup


def _tiny_model(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0, epochs=1)
    return model


@tensorflow_only
def test_kill_while_backing_up_restarts_from_last_complete(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    model = _tiny_model(0)
    backup = run_dir.callbacks(tensorboard=False)[-1]
    assert isinstance(backup, keras.callbacks.BackupAndRestore)
    backup.set_model(model)
    backup.on_epoch_end(0, {"loss": 1.0})
    saved = [w.copy() for w in model.get_weights()]
    assert len(saved) == 2 and callbacks_lib.backup_epoch(
        run_dir.backup_dir) == 1

    # Epoch 2's backup dies half-written.
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0, epochs=1)
    save_weights = model.save_weights

    def dies_while_writing(path, **kwargs):
        save_weights(path, **kwargs)
        with open(path, "r+b") as f:
            f.truncate(100)
        raise Killed()

    model.save_weights = dies_while_writing
    with pytest.raises(Killed):
        backup.on_epoch_end(1, {"loss": 0.5})
    assert sorted(os.listdir(tmp_path)) == ["args.json", "backup"]
    assert sorted(os.listdir(run_dir.backup_dir)) == [
        "latest.weights.h5", "seed_states.json",
        "training_metadata.json"]

    # A restart loads epoch 1 (weights and optimizer state), as Keras'
    # BackupAndRestore does at the start of `fit`.
    restarted = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    assert restarted.resume() == 1
    fresh = _tiny_model(1)
    assert restarted.restore(fresh) == 1
    for a, b in zip(fresh.get_weights(), saved):
        np.testing.assert_array_equal(a, b)
    assert int(fresh.optimizer.iterations.numpy()) == 1
    resumed = fresh.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0,
                        epochs=3, callbacks=restarted.callbacks(
                            tensorboard=False))
    assert len(resumed.history["loss"]) == 2  # epochs 2 and 3
    assert callbacks_lib.backup_epoch(run_dir.backup_dir) == 3
    assert [h["epoch"] for h in restarted.history()] == [2, 3]


def test_a_non_chief_worker_writes_no_backup(tmp_path):
    backup = callbacks_lib.backup_and_restore(str(tmp_path / "backup"),
                                              chief=False)
    backup.set_model(_tiny_model(0))
    backup.on_epoch_end(0, {"loss": 1.0})
    assert os.listdir(tmp_path) == []


@tensorflow_only
def test_shuffled_epochs_depend_only_on_seed_and_epoch():
    import tensorflow as tf

    data = tf.data.Dataset.range(10)

    def batches(initial_epoch, seed=0):
        return [b.numpy().tolist() for b in training.shuffled_epochs(
            data, 10, 4, seed, 3, initial_epoch)]

    full = batches(0)
    assert len(full) == 3 * 2  # drop_remainder: 2 batches an epoch
    assert batches(1) == full[2:] and batches(2) == full[4:]
    assert batches(3) == []  # every epoch done
    assert full[:2] != full[2:4]  # each epoch has its own order
    assert batches(0, seed=1) != full
    for epoch in range(3):
        seen = sum(full[2 * epoch:2 * epoch + 2], [])
        assert len(set(seen)) == 8 and set(seen) <= set(range(10))
    with pytest.raises(ValueError, match="initial_epoch=4"):
        training.shuffled_epochs(data, 10, 4, 0, 3, 4)


# ------------------------------------------------------- SIGKILL, resume


RECIPE = ["--task=builtin", "--synthesizer=random+vanilla",
          "--max_train_examples=320", "--batch_size=16", "--epochs=3",
          "--max_length=24", "--hidden_dim=16", "--num_heads=2",
          "--num_layers=1", "--vocab_size=200", "--learning_rate=3e-3",
          # No dropout: a resumed run's dropout masks would differ.
          "--dropout=0", "--verbose=2", "--no_tensorboard", "--no_export"]


def _start(run_dir):
    """Starts the recipe; it prints `batch-end epoch=E batch=B` after every
    training batch (`tests/recipes/progress_run.py`)."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONUNBUFFERED="1",
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recipes.progress_run", "recipes.glue",
         f"--model_dir={run_dir}"] + RECIPE,
        cwd=REPO, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)


def _finish(process, timeout=240):
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out[-2000:]
    return out


def _comparable(history):
    return [{k: v for k, v in h.items() if k != "steps_per_second"}
            for h in history]


@tensorflow_only
def test_sigkill_mid_epoch_resumes_with_the_same_metrics(tmp_path):
    killed_dir = str(tmp_path / "killed")
    clean_dir = str(tmp_path / "clean")
    backup = os.path.join(killed_dir, "backup")

    # 1. Killed after 5 of epoch 2's 20 batches.
    steps = 320 // 16
    process = _start(killed_dir)
    deadline = time.time() + 240
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.strip() == "batch-end epoch=2 batch=5":
                process.send_signal(signal.SIGKILL)
                break
            assert time.time() < deadline, "".join(seen)[-2000:]
        process.wait(timeout=60)
        # What the recipe printed between that line and its death.
        seen.extend(process.stdout.read().splitlines(keepends=True))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, "".join(seen)[-2000:]
    # Every line the recipe printed, to its death: all of epoch 1, then
    # epoch 2 from its first batch to where the kill landed, in the middle
    # of epoch 2 (the recipe may run a batch or two more while the signal
    # is on its way, but not finish the epoch).
    batches = [tuple(int(field.split("=")[1]) for field in line.split()[1:])
               for line in seen if line.startswith("batch-end")]
    done = len(batches) - steps
    assert 5 <= done < steps, "".join(seen)[-2000:]
    assert batches == [(1, b) for b in range(1, steps + 1)] + [
        (2, b) for b in range(1, done + 1)], batches
    # Keras' end-of-epoch line (verbose=2) came for epoch 1 only.
    assert sum(f"{steps}/{steps}" in line for line in seen) == 1, seen
    # Killed in epoch 2 (5 of its batches done), after epoch 1's backup.
    assert callbacks_lib.backup_epoch(backup) == 1
    assert sorted(os.listdir(backup)) == [
        "latest.weights.h5", "seed_states.json", "training_metadata.json"]
    assert not os.path.exists(os.path.join(killed_dir, "results.json"))

    # 2. Started again with the same arguments; 3. an uninterrupted run.
    resumed = _start(killed_dir)
    out = _finish(resumed)
    assert "Resuming after epoch 1 from" in out
    assert "Epoch 1/3" not in out and "Epoch 2/3" in out
    _finish(_start(clean_dir))

    killed = run_directory.read_json(os.path.join(killed_dir, "results.json"))
    clean = run_directory.read_json(os.path.join(clean_dir, "results.json"))
    assert killed["resumed_from_epoch"] == 1
    assert clean["resumed_from_epoch"] == 0
    assert killed["optimizer_steps"] == clean["optimizer_steps"] == 3 * steps
    # No duplicate or missing epoch, in results.json and in history.csv
    # (CSVLogger counts epochs from 0).
    assert [h["epoch"] for h in killed["history"]] == [1, 2, 3]
    with open(os.path.join(killed_dir, "history.csv")) as f:
        assert [line.split(",")[0] for line in f.read().splitlines()] == [
            "epoch", "0", "1", "2"]
    # Same metrics: the resumed epochs see the same batches (a per-epoch
    # shuffle seed) from the same weights and optimizer state. The
    # tolerance only covers float reduction order in TF's CPU kernels.
    a, b = _comparable(killed["history"]), _comparable(clean["history"])
    assert [sorted(h) for h in a] == [sorted(h) for h in b]
    for ha, hb in zip(a, b):
        for key in ha:
            np.testing.assert_allclose(ha[key], hb[key], rtol=1e-4,
                                       atol=1e-5, err_msg=key)
    for split, values in clean["metrics"].items():
        for name, value in values.items():
            np.testing.assert_allclose(killed["metrics"][split][name], value,
                                       rtol=1e-4, atol=1e-5)
    # Killed after the last backup, before results.json: a restart
    # trains no more and writes the same results.
    os.remove(os.path.join(clean_dir, "results.json"))
    from recipes.glue import train as train_lib

    again = train_lib.run(
        train_lib.build_parser().parse_args(
            [f"--model_dir={clean_dir}"] + RECIPE + ["--verbose=0"]),
        log=lambda *_: None)
    assert again["resumed_from_epoch"] == 3
    assert again["optimizer_steps"] == 3 * steps
    assert _comparable(again["history"]) == _comparable(clean["history"])
    np.testing.assert_allclose(again["metrics"]["dev"]["accuracy"],
                               clean["metrics"]["dev"]["accuracy"],
                               atol=1e-6)
    # Nothing half-written or temporary is left behind.
    for root, dirs, files in os.walk(killed_dir):
        assert not [n for n in dirs + files
                    if n.startswith(run_directory.TMP_PREFIX)], root
