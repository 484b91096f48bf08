"""Every recipe on the suite's Keras backend (TensorFlow, JAX, PyTorch):
the same flags, run directory, results.json, attention pictures and
exports (the SavedModel on TensorFlow; elsewhere one line saying it is
skipped, and the `.keras` model and the preset; on JAX also the
SavedModel of the token-id model). Killed and resumed on every backend:
tests/recipes/test_harness.py.

Tiny models and few steps: each run takes seconds once compiled.
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
SKIPPED = "is skipped on the " + BACKEND + " backend"

GLUE = ["--task=builtin", "--synthesizer=random+vanilla", "--epochs=2",
        "--max_train_examples=96", "--max_length=16", "--hidden_dim=16",
        "--num_heads=2", "--num_layers=1", "--vocab_size=200",
        "--batch_size=16", "--verbose=2", "--learning_rate=3e-3",
        "--no_tensorboard"]


def _start(module, run_dir, *argv):
    """`python -m module` on this suite's backend (passed through), with a
    line after every training batch (`tests/recipes/progress_run.py`)."""
    env = dict(os.environ, KERAS_BACKEND=BACKEND, PYTHONUNBUFFERED="1",
               PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recipes.progress_run", module,
         f"--model_dir={run_dir}", *argv],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def _check_exports(run_dir, results, out):
    """The SavedModel on TensorFlow; elsewhere the one line, `.keras`."""
    if BACKEND == "tensorflow":
        assert results["export"] == os.path.join(run_dir, "export")
        assert os.path.isfile(os.path.join(run_dir, "export",
                                           "saved_model.pb"))
        assert SKIPPED not in out
        return None
    assert results["export"] is None
    lines = [line for line in out.splitlines() if SKIPPED in line]
    assert len(lines) == 1, out[-3000:]
    assert lines[0].startswith("The SavedModel export (")
    assert results["export_skipped"] == lines[0]
    assert results["keras_model"] == os.path.join(run_dir, "model.keras")
    model = keras.saving.load_model(results["keras_model"])
    _check_token_ids_export(run_dir, results, out, model)
    return model


def _check_token_ids_export(run_dir, results, out, model):
    """JAX: the SavedModel of the token-id model (jax2tf), equal to the
    reloaded model on token ids; PyTorch: one line saying why not."""
    if BACKEND == "torch":
        assert results["export_token_ids"] is None
        reason = results["export_token_ids_skipped"]
        assert "torch_xla" in reason and "torch backend" in reason, reason
        assert f"No SavedModel of the token-id model either: {reason}" in out
        return
    import tensorflow as tf

    path = os.path.join(run_dir, "export_token_ids")
    assert results["export_token_ids"] == path
    assert f"Exported a SavedModel (token ids in) to {path}" in out
    usage = results["export_token_ids_usage"]
    assert "tensorflow_text" not in usage["python"]
    assert os.path.isfile(os.path.join(path, "assets", "README.md"))
    serve = tf.saved_model.load(path).signatures["serving_default"]
    specs = serve.structured_input_signature[1]
    assert sorted(specs) == sorted(usage["inputs"])
    rng = np.random.default_rng(0)
    length = next(iter(specs.values())).shape[1]
    inputs = {}
    for name in specs:  # 3 rows (the batch is open), the last one padded
        if "padding_mask" in name:
            value = np.ones((3, length), "int32")
            value[-1, length // 2:] = 0
        elif "segment_ids" in name:
            value = np.zeros((3, length), "int32")
        elif name == "mask_positions":
            value = np.tile(np.arange(length, dtype="int32"), (3, 1))
        else:
            value = rng.integers(1, 20, (3, length)).astype("int32")
        inputs[name] = value
    exported = serve(**{k: tf.constant(v) for k, v in inputs.items()})
    preprocessor, model.preprocessor = model.preprocessor, None
    expected = keras.ops.convert_to_numpy(model.predict(inputs, verbose=0))
    model.preprocessor = preprocessor
    np.testing.assert_allclose(exported["output_0"].numpy(), expected,
                               rtol=1e-4, atol=1e-5)


def test_glue_trains_and_exports(tmp_path):
    """One run, two epochs (killed and resumed on every backend:
    tests/recipes/test_harness.py)."""
    from keras_synth.models import SynthesizerTextClassifier

    run_dir = str(tmp_path / "run")
    process = _start("recipes.glue", run_dir, *GLUE)
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 0, out[-3000:]
    assert f"({BACKEND} backend)" in out or BACKEND == "tensorflow"
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["optimizer_steps"] == 2 * (96 // 16)
    assert [h["epoch"] for h in results["history"]] == [1, 2]
    assert results["num_replicas"] == 1
    assert results["environment"]["keras"] == keras.__version__
    # The backup holds the dropout layers' seed states (Keras' weights
    # files do not), read back by a resumed run (test_harness.py).
    assert os.path.isfile(os.path.join(run_dir, "backup", "epoch-2",
                                       "seeds.json"))
    with open(os.path.join(run_dir, "attention.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    lines = open(os.path.join(run_dir, "submission", "builtin.tsv"),
                 encoding="utf-8").read().splitlines()
    assert len(lines) == 301

    # The preset (and off TensorFlow the .keras model) reload on this
    # backend and agree on raw strings.
    texts = ["the film was not good .", "the plot is great ."]
    preset = SynthesizerTextClassifier.from_preset(results["preset"])
    logits = keras.ops.convert_to_numpy(preset.predict(texts, verbose=0))
    assert logits.shape == (2, 2) and np.isfinite(logits).all()
    model = _check_exports(run_dir, results, out)
    if model is not None:
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(model.predict(texts, verbose=0)),
            logits, rtol=1e-5, atol=1e-6)


def _run_in_process(module, argv):
    import importlib

    train = importlib.import_module(f"recipes.{module}.train")
    args = train.build_parser().parse_args(argv)
    lines = []
    results = train.run(args, log=lines.append)
    return results, "\n".join(str(line) for line in lines)


def test_lm_trains_samples_and_exports(tmp_path):
    run_dir = str(tmp_path / "lm")
    results, out = _run_in_process("lm", [
        "--dataset=builtin", "--sequence_length=16", "--num_layers=1",
        "--hidden_dim=16", "--num_heads=2", "--batch_size=32",
        "--max_train_examples=200", "--epochs=1", "--dropout=0",
        "--verbose=0", "--no_tensorboard", "--max_new_tokens=4",
        f"--model_dir={run_dir}", "--prompts", "ROMEO:"])
    valid = results["evaluation"]["valid"]
    # Better than a uniform guess after one epoch, scored per token.
    assert 0 < valid["loss"] < np.log(results["vocabulary_size"])
    assert results["samples"][0]["text"].startswith("ROMEO:")
    assert os.path.isfile(os.path.join(run_dir, "attention.png"))
    assert os.path.isfile(os.path.join(run_dir, "results.json"))
    assert os.path.isfile(os.path.join(run_dir, "preset", "config.json"))
    _check_exports(run_dir, results, out)


def test_translate_trains_decodes_and_exports(tmp_path):
    run_dir = str(tmp_path / "translate")
    results, out = _run_in_process("translate", [
        "--src=de", "--tgt=en", "--dataset=builtin", "--max_length=16",
        "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
        "--vocab_size=200", "--batch_size=32", "--max_train_examples=128",
        "--epochs=1", "--warmup_steps=2", "--beam_size=2",
        "--decode_batch_size=100", "--verbose=0", "--dropout=0.0",
        "--no_tensorboard", f"--model_dir={run_dir}"])
    assert os.path.isfile(os.path.join(run_dir, "results.json"))
    assert os.path.isfile(os.path.join(run_dir, "model.keras"))
    assert os.path.isfile(os.path.join(run_dir, "hypotheses.valid.en"))
    assert "bleu" in json.dumps(results).lower()
    _check_exports(run_dir, results, out)


def test_pretrain_writes_a_preset_the_classifier_loads(tmp_path):
    from keras_synth.models import SynthesizerTextClassifier

    run_dir = str(tmp_path / "pretrain")
    results, _ = _run_in_process("pretrain", [
        "--objective=mlm", "--hidden_dim=16", "--num_heads=2",
        "--num_layers=1", "--sequence_length=16", "--vocab_size=200",
        "--batch_size=16", "--max_train_examples=200", "--dropout=0",
        "--verbose=0", "--no_tensorboard", "--epochs=1",
        "--steps_per_epoch=4", f"--model_dir={run_dir}"])
    assert results["optimizer_steps"] == 4
    assert results["heldout"]["predicted_tokens"] > 0
    classifier = SynthesizerTextClassifier.from_preset(results["preset"],
                                                       num_classes=2)
    logits = keras.ops.convert_to_numpy(
        classifier.predict(["a fine film ."], verbose=0))
    assert logits.shape == (1, 2) and np.isfinite(logits).all()


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution is JAX's")
def test_model_parallel_layouts_and_training_equal_one_device():
    # tests/recipes/model_parallel_run.py in a fresh process on 4 CPUs.
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=REPO,
               XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
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
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=REPO,
               XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
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
