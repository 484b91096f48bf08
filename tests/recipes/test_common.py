"""recipes.common: pure-Python parts on every backend, TensorFlow parts on
the TensorFlow backend."""

import argparse
import json
import os

import keras
import pytest

from recipes import common
from tests.recipes.two_cpus import run_with_two_cpus

requires_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="tf.distribute, tf.data and tensorflow-text need the TensorFlow "
    "backend (the recipes run on it only)",
)


# ------------------------------------------------------------ pure Python


def test_run_directory_saves_and_checks_its_configuration(tmp_path):
    config = {"task": "sst2", "synthesizer": "random", "epochs": 3,
              "model_dir": str(tmp_path), "strategy": "one_device"}
    run_dir = common.RunDirectory(str(tmp_path), config)
    assert json.loads((tmp_path / "args.json").read_text()) == config
    assert run_dir.last_epoch() == 0 and run_dir.history() == []
    # Same configuration, other runtime flags: the run may be resumed.
    common.RunDirectory(str(tmp_path), dict(config, strategy="mirrored"))
    # A different configuration is refused, naming the differences.
    with pytest.raises(ValueError) as info:
        common.RunDirectory(str(tmp_path),
                            dict(config, synthesizer="dense", epochs=4))
    message = str(info.value)
    assert "different configuration" in message
    assert "--synthesizer: 'random' there, 'dense' now" in message
    assert "--epochs: 3 there, 4 now" in message
    assert "strategy" not in message


def test_run_directory_state(tmp_path):
    run_dir = common.RunDirectory(str(tmp_path), {"a": 1})
    os.makedirs(run_dir.checkpoint_dir)
    common.write_json(os.path.join(run_dir.checkpoint_dir, "state.json"),
                      {"epoch": 2})
    assert run_dir.last_epoch() == 2
    assert run_dir.checkpoint_path(2).endswith(
        os.path.join("checkpoints", "epoch-002.weights.h5"))
    path = run_dir.write_results({"accuracy": 0.5})
    assert common.read_json(path) == {"accuracy": 0.5}


def test_non_chief_worker_writes_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1}}))
    assert not common.is_chief()
    run_dir = common.RunDirectory(str(tmp_path), {"a": 1})
    assert run_dir.root == os.path.join(str(tmp_path), "workers", "worker-1")
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 0}}))
    assert common.is_chief()


def test_check_data_file(tmp_path):
    with pytest.raises(common.DataError,
                       match=r"Expected the vocabulary at .*nope; no such"):
        common.check_data_file(str(tmp_path / "nope"), "vocabulary")
    with pytest.raises(common.DataError, match="it is not a file"):
        common.check_data_file(str(tmp_path))
    (tmp_path / "empty").write_text("")
    with pytest.raises(common.DataError, match="is empty"):
        common.check_data_file(str(tmp_path / "empty"))
    (tmp_path / "ok").write_text("x")
    assert common.check_data_file(str(tmp_path / "ok")) == str(
        tmp_path / "ok")


def test_vocabulary_round_trip_and_checks(tmp_path):
    vocab = list(common.RESERVED_TOKENS) + ["the", "##s"]
    path = str(tmp_path / "vocab.txt")
    common.save_vocabulary(vocab, path)
    assert common.load_vocabulary(path) == vocab
    common.save_vocabulary(["[PAD]", "[CLS]", "the"], path)
    with pytest.raises(common.DataError, match=r"lacks the reserved token"):
        common.load_vocabulary(path)
    common.save_vocabulary(["the"] + list(common.RESERVED_TOKENS), path)
    with pytest.raises(common.DataError, match=r"must start with \[PAD\]"):
        common.load_vocabulary(path)


def test_common_flags():
    parser = argparse.ArgumentParser()
    common.add_common_flags(parser)
    args = parser.parse_args(["--strategy=mirrored", "--batch_size=64",
                              "--mixed_precision=bfloat16", "--jit_compile"])
    assert (args.strategy, args.batch_size, args.mixed_precision,
            args.jit_compile) == ("mirrored", 64, "bfloat16", True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy=gpu"])
    with pytest.raises(ValueError, match=r"--epochs.*--epochs=0"):
        common.positive("epochs", 0)


@pytest.mark.skipif(keras.backend.backend() == "tensorflow",
                    reason="checks the error under another backend")
def test_recipes_refuse_other_backends():
    with pytest.raises(RuntimeError, match="KERAS_BACKEND=tensorflow"):
        common.require_tensorflow_backend()


# ------------------------------------------------------------- TensorFlow


@requires_tensorflow
def test_learn_wordpiece_vocabulary_and_tokenize():
    texts = ["the cat sat on the mat", "the cats sat", "a dog sat"] * 20
    vocab = common.learn_wordpiece_vocabulary(texts, vocab_size=60)
    assert vocab[: len(common.RESERVED_TOKENS)] == list(
        common.RESERVED_TOKENS)
    assert "the" in vocab and "sat" in vocab
    tokenizer = common.wordpiece_tokenizer(vocab)
    ids = tokenizer(["The cat SAT zzzq"])[0]
    tokens = [vocab[int(i)] for i in ids]
    assert tokens[:3] == ["the", "cat", "sat"]
    assert common.UNK in tokens or any(t.startswith("##") for t in tokens)


@requires_tensorflow
def test_prepare_vocabulary_is_saved_and_reused(tmp_path):
    run_dir = common.RunDirectory(str(tmp_path / "run"), {"a": 1})
    texts = ["red green blue"] * 10
    vocab = common.prepare_vocabulary(run_dir, lambda: texts, vocab_size=40,
                                      log=lambda *_: None)
    assert common.load_vocabulary(run_dir.path("vocab.txt")) == vocab

    def fail():
        raise AssertionError("a saved vocabulary must not be re-learned")

    assert common.prepare_vocabulary(run_dir, fail, log=None) == vocab
    given = list(common.RESERVED_TOKENS) + ["x"]
    common.save_vocabulary(given, str(tmp_path / "given.txt"))
    other = common.RunDirectory(str(tmp_path / "other"), {"a": 1})
    assert common.prepare_vocabulary(
        other, fail, vocab_file=str(tmp_path / "given.txt")) == given


@requires_tensorflow
def test_select_strategy():
    import tensorflow as tf

    strategy = common.select_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    strategy = common.select_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match=r"--tpu.*is required"):
        common.select_strategy("tpu")
    with pytest.raises(ValueError, match=r"needs `--strategy=tpu`"):
        common.select_strategy("one_device", tpu="local")
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        common.select_strategy("gpu")


@requires_tensorflow
def test_mirrored_strategy_uses_every_cpu_device():
    # Two logical CPUs (and no GPU) in a fresh process: one replica each.
    result = run_with_two_cpus("""
        import json
        from recipes import common

        strategy = common.select_strategy("mirrored")
        print("RESULT " + json.dumps({
            "replicas": strategy.num_replicas_in_sync,
            "devices": sorted(strategy.extended.worker_devices)}))
    """)
    assert result["replicas"] == 2
    assert [d.rsplit("/", 1)[-1] for d in result["devices"]] == [
        "device:CPU:0", "device:CPU:1"]


@requires_tensorflow
@pytest.mark.parametrize("precision, policy", [
    ("float32", "float32"), ("bfloat16", "mixed_bfloat16"),
    ("float16", "mixed_float16")])
def test_configure_precision(precision, policy):
    try:
        assert common.configure_precision(precision) == policy
        assert keras.config.dtype_policy().name == policy
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="Unknown precision"):
        common.configure_precision("int8")


@requires_tensorflow
def test_learning_rate_schedule():
    schedule = common.learning_rate_schedule(1e-3, total_steps=100,
                                             warmup_fraction=0.1)
    values = [float(schedule(step)) for step in (0, 5, 10, 55, 100)]
    assert values[0] == pytest.approx(0.0)
    assert values[1] == pytest.approx(5e-4, rel=1e-3)
    assert values[2] == pytest.approx(1e-3, rel=1e-3)
    assert values[2] > values[3] > values[4]
    assert values[4] == pytest.approx(0.0, abs=1e-9)
