"""`python -m recipes.lra` end to end on its built-in data (generated
ListOps, the built-in text set): a run reports the cut documents and the
steps reached, and exports; the attention path it announces is the one
the layers take (TensorFlow backend; killed and resumed on every backend:
test_harness.py)."""

import json
import os

import numpy as np
import pytest

from tests.recipes.core.tensorflow_only import requires_tensorflow
from tests.recipes.progress_run import run_here

pytestmark = requires_tensorflow

TINY = ["--hidden_dim=16", "--num_heads=2", "--num_layers=1",
        "--batch_size=8", "--learning_rate=3e-3", "--verbose=2",
        "--no_tensorboard", "--seed=0", "--epochs=3", "--steps_per_epoch=4"]
TASKS = {
    "listops": ["--task=listops", "--listops_train_size=48",
                "--listops_val_size=8", "--listops_test_size=8",
                "--listops_min_length=40", "--listops_max_length=120",
                "--max_length=128", "--synthesizer=random+vanilla"],
    "text": ["--task=text", "--max_length=512",
             "--synthesizer=factorized_random", "--max_train_examples=64"],
}


def _run(run_dir, cache_dir, *extra):
    """`python -m recipes.lra ...` in this process; returns its output."""
    code, out = run_here("recipes.lra", [
        f"--model_dir={run_dir}", f"--cache_dir={cache_dir}", *TINY, *extra])
    assert code == 0, out[-3000:]
    return out


@pytest.mark.parametrize("task", sorted(TASKS))
def test_trains_reports_and_exports(tmp_path, task):
    """One run of 3 epochs, in the test process (each task run as a process,
    killed and resumed on every backend: tests/recipes/test_harness.py)."""
    run_dir, cache = str(tmp_path / "run"), str(tmp_path / "cache")
    out = _run(run_dir, cache, *TASKS[task])
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["optimizer_steps"] == results["steps_reached"] == 12
    assert [h["epoch"] for h in results["history"]] == [1, 2, 3]
    assert "Steps reached: 12" in out
    for split, metrics in results["metrics"].items():
        assert 0.0 <= metrics["accuracy"] <= 1.0, split
    assert os.path.isfile(os.path.join(run_dir, "attention.png"))
    assert os.path.isfile(os.path.join(run_dir, "preset", "config.json"))
    assert os.path.isdir(os.path.join(run_dir, "export"))
    assert results["export_usage"]["signature"] == "serving_default"
    if task == "text":
        # The built-in reviews run past 512 bytes: cut, counted, printed.
        from recipes.lra import text as text_lib

        reviews = text_lib.builtin_splits(0)
        expected = {
            "train": sum(len(b.encode()) + 2 > 512
                         for _, b in reviews["train"][:64]),
            "test": sum(len(b.encode()) + 2 > 512
                        for _, b in reviews["test"])}
        assert results["cut"] == expected and expected["train"] > 0
        assert (f"Text train: {expected['train']} of 64 examples longer "
                "than --max_length=512 tokens were cut") in out
        assert results["attention_path"] == "batch_shared"
        _check_text_export(run_dir, results)
        _check_files_run(tmp_path, reviews)
    else:
        assert results["cut"] == {"train": 0, "valid": 0, "test": 0}
        assert results["attention_path"] == "general"
        # Generated once into the cache (read back: test_lra_data.py).
        assert "ListOps: generated 64 examples (seed 0) into" in out
        _check_token_export(run_dir)
        _check_lra_files_run(tmp_path, cache)


def _check_lra_files_run(tmp_path, cache):
    """`--data_dir` reads LRA's files: here the generated set's folder,
    written in their format; the run trains on the same examples."""
    [folder] = os.listdir(cache)
    run_dir = str(tmp_path / "files")
    code, out = run_here("recipes.lra", [
        "--task=listops", f"--data_dir={os.path.join(cache, folder)}",
        "--max_length=128", f"--model_dir={run_dir}", *TINY, "--epochs=1",
        "--no_export", "--no_attention_plot"])
    assert code == 0, out[-3000:]
    assert "LRA's files in" in out
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["source"].startswith("ListOps (LRA's files in")
    assert results["sequences"]["train"]["examples"] == 48
    assert results["attention_png"] is None and results["export"] is None


def _check_files_run(tmp_path, reviews):
    """`--dataset=files`: `label<TAB>text` files (one gzipped), string
    labels as the classes."""
    import gzip

    names = {"0": "neg", "1": "pos"}
    train = tmp_path / "train.tsv.gz"
    with gzip.open(train, "wt", encoding="utf-8") as f:
        for label, body in reviews["train"][:32]:
            f.write(f"{names[label]}\t{body}\n")
    test = tmp_path / "test.tsv"
    test.write_text("".join(f"{names[label]}\t{body}\n"
                            for label, body in reviews["test"][:8]),
                    encoding="utf-8")
    run_dir = str(tmp_path / "files")
    code, out = run_here("recipes.lra", [
        "--task=text", "--dataset=files", f"--train_file={train}",
        f"--test_file={test}", "--max_length=256", f"--model_dir={run_dir}",
        *TINY, "--epochs=1", "--no_export", "--no_attention_plot"])
    assert code == 0, out[-3000:]
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["classes"] == ["neg", "pos"]
    assert results["sequences"]["train"]["examples"] == 32
    assert results["cut"]["test"] == sum(
        len(body.encode()) + 2 > 256 for _, body in reviews["test"][:8])


def _check_text_export(run_dir, results):
    from keras_synth.models import load_export
    import tensorflow as tf

    model = load_export(os.path.join(run_dir, "export"))
    outputs = model.signatures["serving_default"](
        sentence=tf.constant(["a fine film . " * 60, "dull ."]))
    assert outputs["probabilities"].shape == (2, 2)
    assert outputs["truncated"].numpy().tolist() == [True, False]
    assert set(outputs["label_name"].numpy().tolist()) <= {b"0", b"1"}
    assert results["classes"] == ["0", "1"]


def _check_token_export(run_dir):
    import tensorflow as tf

    from recipes.lra import listops

    model = tf.saved_model.load(os.path.join(run_dir, "export"))
    ids = np.zeros((1, 128), "int32")
    row = listops.encode("[MAX 2 9 ]")
    ids[0, :len(row)] = row
    outputs = model.signatures["serving_default"](
        token_ids=tf.constant(ids))
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(), 1.0,
                               rtol=1e-5)


@pytest.mark.parametrize("synthesizer,dropout,length,expected", [
    ("factorized_random", 0.0, 2200, "query_blocked"),
    ("random+fixed_random", 0.0, 2200, "query_blocked"),
    ("factorized_random", 0.0, 1024, "batch_shared"),
    ("factorized_random", 0.1, 2200, "general"),
    ("dense", 0.0, 2200, "general"),
    ("random+vanilla", 0.0, 2200, "general"),
    ("vanilla", 0.0, 1024, "general"),
    ("factorized_dense", 0.0, 1024, "general"),
    ("fixed_random", 0.0, 1024, "batch_shared"),
])
def test_announced_attention_path_is_taken(monkeypatch, synthesizer,
                                           dropout, length, expected):
    """The path `attention_path` announces is the one a training step of
    the recipe's model takes (the query-blocked function is called, or
    not)."""
    import argparse

    import keras

    from keras_synth.layers.attention import query_blocks
    from recipes.lra import model as model_lib

    path, _ = model_lib.attention_path(synthesizer, dropout, length)
    assert path == expected
    calls = []
    original = query_blocks.blocked_shared_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("block"))
        return original(*args, **kwargs)

    monkeypatch.setattr(query_blocks, "blocked_shared_attention", counted)
    args = argparse.Namespace(
        max_length=length, synthesizer=synthesizer, hidden_dim=8,
        num_layers=1, num_heads=2, intermediate_dim=8, dropout=dropout,
        pooling="cls", synthesizer_options=(
            {"rank": 2} if "factorized_random" in synthesizer else None),
        learning_rate=1e-3, warmup_fraction=0.0,
        weight_decay=0.0, ema_momentum=None, jit_compile=False)
    keras.utils.set_random_seed(0)
    model, _ = model_lib.build_model(args, 20, 10)
    model_lib.compile_model(model, args, 1, 1)
    ids = np.zeros((2, length), "int32")
    ids[:, :length - 5] = 3
    ids[:, 0] = 1
    dataset = model_lib.train_dataset(ids, [1, 2], 2, 0, 1, 0)
    model.fit(dataset, steps_per_epoch=1, epochs=1, verbose=0)
    assert bool(calls) == (expected == "query_blocked"), calls
    if calls:
        assert calls[0] == query_blocks.QUERY_BLOCK


@pytest.mark.parametrize("argv,message", [
    (["--task=text", "--data_dir=x"], "`--data_dir` is for --task=listops"),
    (["--task=listops", "--dataset=files"], "`--dataset` is for --task=text"),
    (["--task=text", "--dataset=files", "--train_file=a"],
     "needs --test_file"),
    (["--task=text", "--train_file=a"], "pass --dataset=files"),
    (["--task=listops", "--listops_max_args=1"], "--listops_max_args"),
    (["--task=text", "--vocab_file=v.txt"], "vocabularies are fixed"),
    (["--task=listops", "--vocab_size=100"],
     "`--vocab_size` does not apply to recipes.lra"),
    (["--task=text", "--synthesizer=randm"], "Unknown variant 'randm'"),
    (["--task=text", "--attention=linformer", "--synthesizer=vanilla"],
     "`--synthesizer` does not apply to --attention=linformer"),
    (["--task=text", "--attention=linformer", "--max_length=128",
      "--linformer_k=256"], "`--linformer_k` must be at most "
     "--max_length=128"),
    (["--task=text", "--linformer_k=64"],
     "`--linformer_k` is for --attention=linformer"),
    (["--task=text", "--attention=linformer", "--factorized_rank=4"],
     "`--factorized_rank` does not apply to --attention=linformer"),
])
def test_bad_flags_exit_2_with_one_line(capsys, argv, message):
    from recipes.lra import train

    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m recipes.lra: error: ")
    assert message in err
