"""recipes.core.run_directory."""

import json
import os

import pytest

from recipes.core import run_directory
from recipes.core import runtime


def test_run_directory_saves_and_checks_its_configuration(tmp_path):
    config = {"task": "sst2", "synthesizer": "random", "epochs": 3,
              "model_dir": str(tmp_path), "strategy": "one_device"}
    run_dir = run_directory.RunDirectory(str(tmp_path), config)
    assert json.loads((tmp_path / "args.json").read_text()) == config
    assert run_dir.last_epoch() == 0 and run_dir.history() == []
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


def test_run_directory_state(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    os.makedirs(run_dir.checkpoint_dir)
    run_directory.write_json(
        os.path.join(run_dir.checkpoint_dir, "state.json"), {"epoch": 2})
    assert run_dir.last_epoch() == 2
    assert run_dir.checkpoint_path(2).endswith(
        os.path.join("checkpoints", "epoch-002.weights.h5"))
    path = run_dir.write_results({"accuracy": 0.5})
    assert run_directory.read_json(path) == {"accuracy": 0.5}


def test_non_chief_worker_writes_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1}}))
    assert not runtime.is_chief()
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    assert run_dir.root == os.path.join(str(tmp_path), "workers", "worker-1")
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 0}}))
    assert runtime.is_chief()
