"""Every registered recipe on the suite's Keras backend, as a user runs it.

For each smoke command of `recipes.registry` (`python -m recipes.<name>`,
a tiny built-in task, the recipe's default `--dropout`), on the backend of
the test run (`KERAS_BACKEND`: tensorflow, jax or torch):

(a) two epochs uninterrupted, in the test process (the module's
    `__main__`, as `python -m` runs it: `progress_run.run_here`; a
    process per run would add only its imports, about 10 s);
(b) the same command in a new folder, a process SIGKILLed in the middle
    of epoch 2 (`tests/recipes/progress_run.py`): it trained all of epoch
    1 and part of epoch 2, and its folder holds epoch 1's backup
    (`backup/LATEST` names `epoch-1`) and no `results.json`;
(c) (b) resumed by the same command, in the test process before (a)
    (what it resumes from is what the killed process left on disk): it
    trains epoch 2 only, whole; its per-epoch history
    (`results.json` `history`: the losses, metrics and validation
    metrics) and `history.csv` equal (a)'s (to `LOSS_RTOL`), as do its
    optimizer steps; one backup is left, the last, and nothing temporary;
    `results.json` names the exports the registry declares (the SavedModel
    on TensorFlow; elsewhere `export_skipped`, one line, and the `.keras`
    model).

The uninterrupted run (a) is then checked as a user would use it: on
every backend the SavedModel of the token-id model equals the reloaded
`.keras` model (JAX) or one line says why it is not written (PyTorch),
and each recipe's own outputs are checked (`RUN_CHECKS`: GLUE's preset,
`.keras` model, SavedModel, metrics, attention picture and submission
file; the LM's samples
and validation loss; translation's hypotheses, scores, `.keras` model
and SavedModel; pretraining's preset,
loaded by the classifier). One run per recipe and backend serves all of
these checks.
"""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest

import keras_synth
from recipes import registry
from tests.recipes.progress_run import kill_at
from tests.recipes.progress_run import run_here

BACKEND = keras.backend.backend()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
COMMANDS = registry.smoke_commands()
TIMEOUT = 600
# Relative tolerance of the loss comparison. Two identical runs started side
# by side on 2 busy cores can differ in float32 rounding (PyTorch CPU, lra
# text: 1.3e-6 in epoch 1, grown to 2.4e-5 in epoch 2 by Adam; sequential
# runs agree to every digit). The defects the comparison targets are far
# larger: a resumed LRA run fed epoch 1's batches again in epoch 2 logs
# 0.621 where the uninterrupted run logs 0.830 (25%).
LOSS_RTOL = 1e-3


def _start(module, run_dir, argv):
    """`python -m module ARGV --epochs=2 --model_dir=RUN_DIR` on this
    suite's backend, printing a line after every training batch."""
    env = dict(os.environ, KERAS_BACKEND=BACKEND, PYTHONUNBUFFERED="1",
               PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recipes.progress_run", module, *argv,
         "--epochs=2", f"--model_dir={run_dir}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def _results(run_dir):
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def _batches(lines):
    """The `(epoch, batch)` of every `batch-end` line."""
    return [tuple(int(field.split("=")[1]) for field in line.split()[1:])
            for line in lines if line.startswith("batch-end")]


def _comparable(history):
    """History rows without the epoch number and the timings."""
    return [{k: v for k, v in row.items()
             if k != "epoch" and not k.endswith("per_second")}
            for row in history]


def _check_exports(recipe, run_dir, results):
    for key in recipe.exports:
        assert results.get(key) and os.path.exists(results[key]), (key,
                                                                   results)
        assert os.path.dirname(os.path.abspath(results[key])) == run_dir
    if not recipe.saved_model:
        return
    if BACKEND == "tensorflow":
        assert results["export"] == os.path.join(run_dir, "export")
        assert os.path.isfile(os.path.join(run_dir, "export",
                                           "saved_model.pb"))
        assert "export_skipped" not in results
    else:
        assert results["export"] is None
        reason = results["export_skipped"]
        assert "\n" not in reason and f"skipped on the {BACKEND} backend" in (
            reason), reason
        assert results["keras_model"] == os.path.join(run_dir, "model.keras")
        assert os.path.isfile(results["keras_model"])


def _check_logged_exports(run_dir, results, out):
    """Off TensorFlow: the one logged line saying the SavedModel is
    skipped, the `.keras` model that reloads, and the token-id model's
    SavedModel (JAX) or the line saying why not (PyTorch). Returns the
    reloaded model (None on TensorFlow)."""
    skipped = f"is skipped on the {BACKEND} backend"
    if BACKEND == "tensorflow":
        assert skipped not in out
        return None
    lines = [line for line in out.splitlines() if skipped in line]
    assert len(lines) == 1, out[-3000:]
    assert lines[0].startswith("The SavedModel export (")
    assert results["export_skipped"] == lines[0]
    # `import keras_synth` registers every class the file names.
    model = keras.saving.load_model(results["keras_model"])
    assert type(model).__module__.startswith(f"{keras_synth.__name__}.models")
    if BACKEND == "torch":
        assert results["export_token_ids"] is None
        reason = results["export_token_ids_skipped"]
        assert "torch_xla" in reason and "torch backend" in reason, reason
        assert f"No SavedModel of the token-id model either: {reason}" in out
        return model
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
    return model


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def _check_glue(run_dir, results, out, model):
    from keras_synth.models import SynthesizerTextClassifier

    args = results["args"]
    assert f"({BACKEND} backend)" in out or BACKEND == "tensorflow"
    assert results["optimizer_steps"] == 2 * (
        args["max_train_examples"] // args["batch_size"])
    assert results["num_replicas"] == 1
    # The backup holds the dropout layers' seed states (Keras' weights
    # files do not), read back by the resumed run above.
    assert os.path.isfile(os.path.join(run_dir, "backup", "epoch-2",
                                       "seeds.json"))
    assert _is_png(os.path.join(run_dir, "attention.png"))
    lines = open(os.path.join(run_dir, "submission", "builtin.tsv"),
                 encoding="utf-8").read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 301
    assert {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}
    for name in ("vocab.txt", "args.json", "history.csv"):
        assert os.path.isfile(os.path.join(run_dir, name)), name
    assert (results["task"], results["synthesizer"]) == (
        "builtin", args["synthesizer"])
    # The final dev accuracy is the last epoch's evaluation (the same
    # weights), computed by another code path (the epoch callback).
    assert results["metrics"]["dev"]["accuracy"] == pytest.approx(
        results["history"][-1]["dev_accuracy"], abs=1e-6)
    assert results["steps_per_second"] >= (
        results["optimizer_steps"] / results["wall_time_s"] > 0)
    # The preset (and off TensorFlow the .keras model) reload on this
    # backend and agree on raw strings; on TensorFlow the SavedModel
    # (raw strings in) too. A sentence longer than --max_length included.
    texts = ["the film was not good .", "the plot is great .",
             "honestly , the cast felt dull but the music was fresh . " * 4]
    preset = SynthesizerTextClassifier.from_preset(results["preset"])
    assert results["parameters"] == sum(
        int(np.prod(w.shape)) for w in preset.trainable_weights)
    logits = keras.ops.convert_to_numpy(preset.predict(texts, verbose=0))
    assert logits.shape == (3, 2) and np.isfinite(logits).all()
    if model is not None:
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(model.predict(texts, verbose=0)),
            logits, rtol=1e-5, atol=1e-6)
    if BACKEND == "tensorflow":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (the export's tokenizer ops)

        serve = tf.saved_model.load(results["export"]).signatures[
            "serving_default"]
        served = serve(sentence=tf.constant(texts))
        probabilities = keras.ops.convert_to_numpy(
            keras.ops.softmax(logits))
        np.testing.assert_allclose(served["probabilities"].numpy(),
                                   probabilities, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(served["label"].numpy(),
                                      probabilities.argmax(-1))


def _check_lm(run_dir, results, out, model):
    valid = results["evaluation"]["valid"]
    # Better than a uniform guess after the run, scored per token.
    assert 0 < valid["loss"] < np.log(results["vocabulary_size"])
    samples = results["samples"]
    assert samples and all(s["text"].startswith(s["prompt"])
                           for s in samples), samples
    assert _is_png(os.path.join(run_dir, "attention.png"))
    assert os.path.isfile(os.path.join(run_dir, "preset", "config.json"))


def _check_decoded(results, out):
    """An encoder-decoder's smoke command decodes the first
    `--max_decode_examples` pairs of each split, counted and logged."""
    limit = results["args"]["max_decode_examples"]
    for split, count in results["decoded_pairs"].items():
        assert count["decoded"] == limit < count["of"], results[
            "decoded_pairs"]
        assert (f"{split}: decoding and scoring the first {limit} of "
                f"{count['of']} pairs (--max_decode_examples={limit})."
                ) in out, out[-3000:]
    return limit


def _check_translate(run_dir, results, out, model):
    """The hypotheses written and their scores (recomputed with
    sacrebleu); the `.keras` file names only the package's classes and
    translates as the run did; on TensorFlow the SavedModel's `translate`
    signature answers as the `.keras` model, a too-long source cut and
    flagged."""
    import sacrebleu

    from keras_synth.models import SynthesizerSeq2SeqLM
    from recipes.core import seq2seq_model as modeling
    from recipes.translate import data as data_lib

    limit = _check_decoded(results, out)
    args = results["args"]
    references = data_lib.load_files(data_lib.builtin_files(
        args["src"], args["tgt"]))
    for split in ("valid", "test"):
        with open(results["hypotheses"][split], encoding="utf-8") as f:
            hypotheses = f.read().splitlines()
        assert len(hypotheses) == limit
        wanted = [list(references[split].tgt[:limit])]
        assert results["bleu"][split] == pytest.approx(
            sacrebleu.corpus_bleu(hypotheses, wanted).score, abs=1e-6)
        assert results["chrf"][split] == pytest.approx(
            sacrebleu.corpus_chrf(hypotheses, wanted).score, abs=1e-6)
    with zipfile.ZipFile(results["keras_model"]) as archive:
        config = archive.read("config.json").decode()
    assert "keras_synth>InverseSqrtSchedule" in config
    assert "recipes" not in config
    loaded = model or keras.saving.load_model(results["keras_model"])
    assert isinstance(loaded, SynthesizerSeq2SeqLM)
    # The run's sampler (a beam of --beam_size).
    modeling.compile_lm(loaded, 3e-3, 10, beam_size=args["beam_size"])
    sources = list(references["test"].src[:4]) + ["Ein Hund " * 30]
    expected, stats = modeling.translate(loaded, sources, batch_size=4)
    assert stats["truncated"] >= 1  # (the last one at least)
    assert all(isinstance(t, str) for t in expected)
    if BACKEND != "tensorflow":
        return
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the export's tokenizer ops)

    outputs = tf.saved_model.load(results["export"]).signatures[
        "translate"](source=tf.constant(sources))
    assert [t.decode("utf-8") for t in outputs["translation"].numpy()] == (
        expected)
    cut = outputs["source_truncated"].numpy().tolist()
    assert cut[-1] and sum(cut) == stats["truncated"], (cut, stats)
    with open(os.path.join(results["export"], "assets", "README.md"),
              encoding="utf-8") as f:
        assert "signatures['translate']" in f.read()


# A text-to-text recipe's outputs key -> (recipe, its SavedModel's
# signature, input, output).
TEXT_TO_TEXT = {"summaries": ("summarize", "summarize", "document",
                              "summary"),
                "responses": ("dialogue", "respond", "source", "response")}


def _check_text_to_text(run_dir, results, out, model):
    limit = _check_decoded(results, out)
    outputs, = set(TEXT_TO_TEXT) & set(results)
    written = {}
    for split in ("valid", "test"):
        for search in ("greedy", "beam2"):
            with open(results[outputs][search][split],
                      encoding="utf-8") as f:
                written[split, search] = f.read().splitlines()
            assert len(written[split, search]) == limit, (split, search)
    if BACKEND != "tensorflow":
        return
    # The SavedModel, under the recipe's own names, answers the valid
    # inputs as the run did (its last search, the beam; one batch, as the
    # run decoded them).
    import argparse
    import importlib

    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the export's tokenizer ops)

    recipe, signature, input_name, output_name = TEXT_TO_TEXT[outputs]
    usage = results["export_usage"]
    assert usage["signature"] == signature, usage
    assert sorted(usage["inputs"]) == [input_name], usage
    assert sorted(usage["outputs"]) == sorted([output_name,
                                               "source_truncated"]), usage
    assert f"signature '{signature}', strings in and out" in out
    train = importlib.import_module(f"recipes.{recipe}.train")
    sources = train.load_corpus(argparse.Namespace(**results["args"]))[
        "valid"].src[:limit]
    serve = tf.saved_model.load(results["export"]).signatures[signature]
    got = serve(**{input_name: tf.constant(sources)})[output_name]
    assert [t.decode("utf-8") for t in got.numpy()] == written[
        "valid", "beam2"]


def _check_pretrain(run_dir, results, out, model):
    from keras_synth.models import SynthesizerTextClassifier

    assert results["optimizer_steps"] == 2 * results["args"][
        "steps_per_epoch"]
    assert results["heldout"]["predicted_tokens"] > 0
    classifier = SynthesizerTextClassifier.from_preset(results["preset"],
                                                       num_classes=2)
    logits = keras.ops.convert_to_numpy(
        classifier.predict(["a fine film ."], verbose=0))
    assert logits.shape == (1, 2) and np.isfinite(logits).all()


# Checks of a recipe's uninterrupted run beyond the exports, by recipe name.
RUN_CHECKS = {"glue": _check_glue, "lm": _check_lm,
              "translate": _check_translate, "pretrain": _check_pretrain,
              "summarize": _check_text_to_text,
              "dialogue": _check_text_to_text}


@pytest.mark.parametrize("key, recipe, argv", COMMANDS,
                         ids=[key for key, _, _ in COMMANDS])
def test_recipe_trains_resumes_after_a_kill_and_exports(key, recipe, argv,
                                                         tmp_path,
                                                         record_property):
    straight_dir = str(tmp_path / "straight")
    killed_dir = str(tmp_path / "killed")
    seen = _batches(kill_at(_start(recipe.module, killed_dir, argv),
                            epoch=2, batch=2, timeout=TIMEOUT))
    # Killed in epoch 2 after all of epoch 1 (a batch or two more may run
    # while the signal is on its way, not the whole epoch), after epoch 1's
    # backup and before results.json.
    steps = sum(epoch == 1 for epoch, _ in seen)
    assert seen == [(1, b) for b in range(1, steps + 1)] + [
        (2, b) for b in range(1, len(seen) - steps + 1)], seen
    assert 2 <= len(seen) - steps < steps, seen
    backup = os.path.join(killed_dir, "backup")
    with open(os.path.join(backup, "LATEST"), encoding="utf-8") as f:
        assert f.read() == "epoch-1\n"
    assert sorted(os.listdir(backup)) == ["LATEST", "epoch-1"]
    assert not os.path.exists(os.path.join(killed_dir, "results.json"))
    # Resumed before the uninterrupted run, so that nothing of that run
    # is alive in this process to stand in for what the backup holds.
    code, resumed_out = run_here(recipe.module, [
        *argv, "--epochs=2", f"--model_dir={killed_dir}"],
        with_batch_lines=True)
    assert code == 0, resumed_out[-3000:]
    assert "Resuming after epoch 1 from" in resumed_out, resumed_out[-3000:]
    assert _batches(resumed_out.splitlines()) == [
        (2, b) for b in range(1, steps + 1)], resumed_out[-3000:]
    code, straight_out = run_here(recipe.module, [
        *argv, "--epochs=2", f"--model_dir={straight_dir}"])
    assert code == 0, straight_out[-3000:]

    uninterrupted, resumed = _results(straight_dir), _results(killed_dir)
    assert resumed["resumed_from_epoch"] == 1
    for results in (uninterrupted, resumed):
        assert [h["epoch"] for h in results["history"]] == [1, 2], results
        assert results["environment"]["keras"] == keras.__version__
    assert "resumed_from_epoch" not in uninterrupted or (
        uninterrupted["resumed_from_epoch"] in (None, 0)), uninterrupted
    assert resumed.get("optimizer_steps") == uninterrupted.get(
        "optimizer_steps")
    # One backup, the last; nothing temporary anywhere in the run folder;
    # history.csv as Keras' CSVLogger writes it (epochs from 0).
    assert sorted(os.listdir(backup)) == ["LATEST", "epoch-2"]
    for root, dirs, files in os.walk(killed_dir):
        assert not [n for n in dirs + files if "tmp" in n.lower()], root
    with open(os.path.join(killed_dir, "history.csv"),
              encoding="utf-8") as f:
        assert [line.split(",")[0] for line in f.read().splitlines()] == [
            "epoch", "0", "1"]
    _check_exports(recipe, straight_dir, uninterrupted)
    _check_exports(recipe, killed_dir, resumed)
    model = (_check_logged_exports(straight_dir, uninterrupted, straight_out)
             if recipe.saved_model else None)
    if recipe.name in RUN_CHECKS:
        RUN_CHECKS[recipe.name](straight_dir, uninterrupted, straight_out,
                                model)
    # Dropout (the recipe's default) included: the backup holds the seed
    # states, so the resumed epoch 2 repeats the uninterrupted one.
    got = [h["loss"] for h in resumed["history"]]
    want = [h["loss"] for h in uninterrupted["history"]]
    # For the docs' table (`--junitxml`): the losses, the largest relative
    # difference, what was exported.
    record_property("losses", json.dumps({"uninterrupted": want,
                                          "resumed": got}))
    record_property("max_rel_diff", max(
        abs(a - b) / abs(b) for a, b in zip(got, want)))
    record_property("exports", json.dumps(sorted(
        k for k in ("export", "keras_model", "preset", "export_token_ids")
        if resumed.get(k))))
    assert got == pytest.approx(want, rel=LOSS_RTOL), (
        got, want, straight_out[-500:])
    # Every other number of the history too (metrics, validation).
    a, b = (_comparable(r["history"]) for r in (resumed, uninterrupted))
    assert [sorted(row) for row in a] == [sorted(row) for row in b]
    for got_row, want_row in zip(a, b):
        assert got_row == pytest.approx(want_row, rel=LOSS_RTOL, abs=1e-6)
