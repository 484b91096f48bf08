"""recipes.core.run_directory."""

import json
import os
import shutil

import pytest

from recipes.core import cluster
from recipes.core import run_directory
from recipes.core import storage


def test_run_directory_saves_and_checks_its_configuration(tmp_path):
    config = {"task": "sst2", "synthesizer": "random", "epochs": 3,
              "model_dir": str(tmp_path), "strategy": "one_device"}
    run_dir = run_directory.RunDirectory(str(tmp_path), config)
    assert json.loads((tmp_path / "args.json").read_text()) == config
    assert run_dir.resume() == 0 and run_dir.history() == []
    # Same configuration, other runtime flags: the run may be resumed.
    run_directory.RunDirectory(str(tmp_path),
                               dict(config, strategy="mirrored"))
    # A different configuration is refused, naming the differences.
    with pytest.raises(ValueError) as info:
        run_directory.RunDirectory(
            str(tmp_path), dict(config, synthesizer="dense", epochs=4))
    message = str(info.value)
    assert "different configuration" in message
    assert "--synthesizer: 'random' there, 'dense' now" in message
    assert "--epochs: 3 there, 4 now" in message
    assert "strategy" not in message


def test_a_flag_added_later_reads_as_its_old_behaviour(tmp_path):
    """A configuration saved before a flag existed resumes with the flag at
    the value that keeps the old behaviour, and only with it."""
    config = {"task": "text", "synthesizer": "random", "epochs": 3}
    run_directory.RunDirectory(str(tmp_path), config)
    added = {"attention": "synthesizer", "linformer_k": None}
    run_directory.RunDirectory(
        str(tmp_path), dict(config, attention="synthesizer",
                            linformer_k=None), added_flags=added)
    assert json.loads((tmp_path / "args.json").read_text()) == config
    with pytest.raises(ValueError, match="--attention: 'synthesizer' "
                       "there, 'linformer' now"):
        run_directory.RunDirectory(
            str(tmp_path), dict(config, attention="linformer",
                                linformer_k=None), added_flags=added)
    with pytest.raises(ValueError, match="--attention: None there"):
        run_directory.RunDirectory(
            str(tmp_path), dict(config, attention="synthesizer",
                                linformer_k=None))


def test_run_directory_state(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    os.makedirs(run_dir.backup_dir)
    with open(os.path.join(run_dir.backup_dir, "training_metadata.json"),
              "w") as f:
        json.dump({"epoch": 2, "batch": 0}, f)
    assert run_dir.resume() == 2
    assert run_dir.backup_dir == os.path.join(str(tmp_path), "backup")
    path = run_dir.write_results({"accuracy": 0.5})
    assert storage.read_json(path) == {"accuracy": 0.5}


def test_non_chief_worker_reads_the_chiefs_folder_and_writes_nothing(
        tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1}}))
    assert not cluster.is_chief()
    folder = tmp_path / "run"
    run_dir = run_directory.RunDirectory(str(folder), {"a": 1})
    assert run_dir.root == str(folder) and not run_dir.is_chief
    assert not folder.exists()  # no args.json, no scratch folder
    # It does not check the chief's folder (the chief does).
    folder.mkdir()
    (folder / "args.json").write_text('{"a": 2}')
    run_directory.RunDirectory(str(folder), {"a": 1})
    assert sorted(os.listdir(folder)) == ["args.json"]
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 0}}))
    assert cluster.is_chief()
    with pytest.raises(ValueError, match="different configuration"):
        run_directory.RunDirectory(str(folder), {"a": 1})


def _checkpoint(backup, epoch):
    folder = backup / f"epoch-{epoch}"
    folder.mkdir(parents=True)
    (folder / run_directory.WEIGHTS).write_bytes(b"weights")
    (folder / run_directory.HISTORY).write_text(json.dumps(
        [{"epoch": e, "loss": 1.0 / e} for e in range(1, epoch + 1)]))


@pytest.mark.parametrize("read", ["resume", "history"])
def test_a_worker_reading_while_the_chief_moves_latest_on(tmp_path,
                                                          monkeypatch, read):
    # A non-chief worker reads LATEST ("epoch-1"); before it opens that
    # checkpoint the chief writes epoch-2, names it in LATEST and deletes
    # epoch-1 (CI saw `LATEST names 'epoch-1'` ... "changed by hand" there).
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    backup = tmp_path / "backup"
    _checkpoint(backup, 1)
    (backup / "LATEST").write_text("epoch-1\n")
    reads = []

    def read_text(path):
        text = storage.read_text(path)
        if not reads:  # the chief's rotation, right after the first read
            _checkpoint(backup, 2)
            (backup / "LATEST").write_text("epoch-2\n")
            if read == "resume":
                shutil.rmtree(backup / "epoch-1")
        reads.append(text)
        return text

    monkeypatch.setattr(run_directory, "read_text", read_text)
    if read == "resume":
        assert run_dir.resume() == 2
        assert reads == ["epoch-1\n", "epoch-2\n"]
    else:  # epoch-1 still there at `resume`, gone before its history is read
        real_exists = storage.gfile().exists

        class Gfile:
            def __getattr__(self, name):
                return getattr(storage.gfile(), name)

            def exists(self, path):
                if path.endswith(os.path.join("epoch-1", "history.json")):
                    shutil.rmtree(backup / "epoch-1")
                return real_exists(path)

        monkeypatch.setattr(run_directory, "gfile", Gfile)
        assert [row["epoch"] for row in run_dir.history()] == [1, 2]


def test_latest_naming_a_missing_checkpoint_is_still_an_error(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    backup = tmp_path / "backup"
    _checkpoint(backup, 1)
    (backup / "LATEST").write_text("epoch-3\n")
    with pytest.raises(ValueError, match="names 'epoch-3'.*changed by hand"):
        run_dir.resume()
