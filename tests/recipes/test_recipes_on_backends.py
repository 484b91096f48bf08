"""The recipes' parts that differ between Keras backends, on the suite's
backend: JAX's `keras.distribution` (data and model parallel on a mesh of
CPU devices, through the whole GLUE recipe) and the batch shapes each
backend trains on. Every recipe trains, is killed, resumes and exports on
every backend, its run directory and exports checked: test_harness.py.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest


BACKEND = keras.backend.backend()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

GLUE = ["--task=builtin", "--synthesizer=random+vanilla", "--epochs=2",
        "--max_train_examples=96", "--max_length=16", "--hidden_dim=16",
        "--num_heads=2", "--num_layers=1", "--vocab_size=200",
        "--batch_size=16", "--verbose=2", "--learning_rate=3e-3",
        "--no_tensorboard"]


def _four_cpus_env():
    """A fresh JAX process's environment with 4 CPU devices (its XLA flags
    added to the suite's)."""
    return dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=REPO,
                XLA_FLAGS=os.environ.get("XLA_FLAGS", "")
                + " --xla_force_host_platform_device_count=4",
                JAX_PLATFORMS="cpu")


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution is JAX's")
def test_model_parallel_layouts_and_training_equal_one_device():
    # tests/recipes/model_parallel_run.py in a fresh process on 4 CPUs.
    env = _four_cpus_env()
    process = subprocess.run(
        [sys.executable, os.path.join(REPO, "tests", "recipes",
                                      "model_parallel_run.py")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in process.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["devices"] == 4
    one = result["one"]
    assert one["layouts"] == {}
    for name in ("data_parallel", "model_parallel"):
        np.testing.assert_allclose(result[name]["loss"], one["loss"],
                                   rtol=1e-5, err_msg=name)
        for path, weights in one["weights"].items():
            np.testing.assert_allclose(result[name]["weights"][path],
                                       weights, rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name}: {path}")
    # DataParallel replicates every variable; ModelParallel lays them out
    # as the backbone's get_layout_map asks.
    assert result["data_parallel"]["layouts"] == {}
    layouts = result["model_parallel"]["layouts"]
    prefix = "encoder_0/self_attention_layer/"
    assert layouts[prefix + "random/logits"] == ["model", None, None]
    assert layouts[prefix + "vanilla/query/kernel"] == [None, "model", None]
    assert layouts[prefix + "value/kernel"] == [None, "model", None]
    assert layouts[prefix + "attention_output/kernel"] == [
        "model", None, None]
    assert layouts["encoder_0/feedforward_intermediate_dense/kernel"] == [
        None, "model"]
    assert layouts["encoder_0/feedforward_output_dense/kernel"] == [
        "model", None]
    assert layouts["embedding/token_embedding/embeddings"] == [None, "model"]
    assert prefix + "mixture_logits" not in layouts  # replicated


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution is JAX's")
def test_glue_recipe_trains_model_parallel_end_to_end(tmp_path):
    """`--distribution=model_parallel` through the whole recipe (fit,
    per-epoch dev metrics, backup, evaluation, .keras model and preset) on
    a (2, 2) mesh of 4 CPU devices, to the losses of one device."""
    env = _four_cpus_env()
    histories = {}
    for name, extra in (("one", []), ("mesh", [
            "--distribution=model_parallel", "--model_parallel=2"])):
        run_dir = str(tmp_path / name)
        done = subprocess.run(
            [sys.executable, "-m", "recipes.glue", *GLUE, "--dropout=0",
             f"--model_dir={run_dir}", *extra],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        with open(os.path.join(run_dir, "results.json")) as f:
            results = json.load(f)
        histories[name] = results["history"]
        assert os.path.isfile(os.path.join(run_dir, "model.keras"))
        assert os.path.isfile(os.path.join(run_dir, "preset", "config.json"))
    assert ("keras.distribution.ModelParallel (jax backend) with 2 "
            "replica(s)") in done.stdout
    assert results["num_replicas"] == 2
    for key in ("loss", "dev_accuracy"):
        np.testing.assert_allclose([h[key] for h in histories["mesh"]],
                                   [h[key] for h in histories["one"]],
                                   rtol=1e-5, err_msg=key)


class _Captured(Exception):
    pass


def test_glue_batch_lengths_on_this_backend(tmp_path, monkeypatch):
    """TensorFlow and PyTorch: each batch cut to its longest sequence. JAX
    (one compiled step per shape): padded up to the next of 16, 32, ...,
    `--max_length` (`recipes.core.lengths`), never cut."""
    from recipes.core import experiment
    from recipes.core import lengths
    from recipes.glue import train as train_lib

    def capture(args, run_dir, strategy, build, train_data, *rest, **kw):
        raise _Captured(train_data)

    monkeypatch.setenv("KERAS_BACKEND", BACKEND)
    monkeypatch.setattr(experiment, "train_and_evaluate", capture)
    argv = [a for a in GLUE if not a.startswith("--max_length")]
    args = train_lib.build_parser().parse_args(
        argv + ["--max_length=40", f"--model_dir={tmp_path / 'run'}"])
    with pytest.raises(_Captured) as captured:
        train_lib.run(args, log=lambda *_: None)
    dataset = captured.value.args[0]
    widths = []
    for inputs, labels in dataset.take(12):
        mask = inputs["padding_mask"].numpy()
        longest = int(mask.sum(axis=1).max())
        width = mask.shape[1]
        assert inputs["token_ids"].shape == mask.shape
        if BACKEND == "jax":
            expected = min(b for b in lengths.bucket_lengths(40)
                           if b >= longest)
        else:
            expected = longest
        assert width == expected, (BACKEND, width, longest)
        widths.append(width)
    if BACKEND != "jax":  # lengths between the buckets occur
        assert set(widths) - set(lengths.bucket_lengths(40)), widths
