"""ONNX and LiteRT exports of every task and variant (`export_model`),
reloaded in onnxruntime / the LiteRT interpreter and compared with Keras;
where a pair cannot export, the one-line error that names it (the
measured matrix: docs/export.md)."""

import functools
import importlib.util
import re

import keras
import numpy as np
import pytest

from keras_synth.models import CachedDecodingStep
from keras_synth.models import ExportError
from keras_synth.models import export_model
from keras_synth.models.export_formats import CONVERTERS
from keras_synth.models.export_formats import PACKAGES
from keras_synth.models.export_formats import SUFFIXES
from keras_synth.models.export_formats import summarize
from tests.models import export_utils as eu

# The measured failures (docs/export.md): (format, backend, task) ->
# {variant: cause}, the cause a substring of the message; "*" stands for
# every variant.
ALL = "*"
FAILURES = {}
for task in eu.TASKS:
    FAILURES[("litert", "jax", task)] = {
        ALL: "supports the tensorflow and torch backends only"}


@functools.lru_cache(maxsize=None)
def shared_task(task, variant):
    """`eu.make_task(task, variant)`, built once per test process for
    this module: the ONNX and LiteRT cells of a (task, variant), its
    SavedModel test and the argument checks all read the same model.
    `export_model` traces the model, it changes none of its weights, and
    every test here feeds the same fixed-shape inputs (copies where it
    slices them). Cleared at the end of the module (`_free_shared`)."""
    return eu.make_task(task, variant)


@functools.lru_cache(maxsize=None)
def shared_keras_outputs(task, variant):
    """`eu.keras_outputs` of `shared_task(task, variant)`: the reference
    every format's cell compares with (one `predict` per model)."""
    model, x = shared_task(task, variant)
    return eu.keras_outputs(model, x)


@pytest.fixture(scope="module", autouse=True)
def _free_shared():
    yield
    shared_keras_outputs.cache_clear()
    shared_task.cache_clear()


def expected_failure(format, backend, task, variant):
    causes = FAILURES.get((format, backend, task), {})
    return causes.get(variant, causes.get("*"))


@pytest.mark.parametrize("variant", eu.VARIANTS)
@pytest.mark.parametrize("task", eu.TASKS)
@pytest.mark.parametrize("format", eu.FORMATS)
def test_export_matches_keras(format, task, variant, tmp_path):
    backend = keras.backend.backend()
    cause = expected_failure(format, backend, task, variant)
    converter = CONVERTERS.get((format, backend))
    # (A cell expected to fail fails for its converter's reason only with
    # the converter installed.)
    if converter is not None and importlib.util.find_spec(converter) is None:
        pytest.skip(f"{format} export on {backend} needs "
                    f"`pip install {PACKAGES[converter]}`")
    model, x = shared_task(task, variant)
    path = str(tmp_path / f"model{SUFFIXES[format]}")
    if cause is not None:
        with pytest.raises(ExportError) as error:
            export_model(model, path, format, batch_size=eu.BATCH,
                         num_predictions=eu.PREDICTIONS)
        message = str(error.value)
        assert "\n" not in message
        for part in (f"synthesizer={variant!r}", f"format={format!r}",
                     backend, cause):
            assert part in message, (part, message)
        return
    missing = eu.runtime_missing(format)
    if missing:
        pytest.skip(f"reloading {format} needs the `{missing}` package")
    expected = shared_keras_outputs(task, variant)
    export_model(model, path, format, batch_size=eu.BATCH,
                 num_predictions=eu.PREDICTIONS)
    got = (eu.run_onnx if format == "onnx" else eu.run_litert)(path, x)
    pairs = eu.match_outputs(expected, got)
    assert len(pairs) == len(expected)
    for want, have in pairs:
        assert have.shape == want.shape
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5)
    if task == "classifier":  # probabilities out
        np.testing.assert_allclose(pairs[0][1].sum(-1), 1.0, atol=1e-5)


def test_decoding_step_matches_call_with_cache():
    model, x = shared_task("decoding_step", "random+vanilla")
    out = model(x)
    caches = tuple(x[f"cache_{i}"] for i in range(2))
    logits, _, new = model.causal_lm.call_with_cache(
        x["token_ids"], caches, 3)
    np.testing.assert_allclose(eu.to_numpy(out["logits"]),
                               eu.to_numpy(logits), atol=1e-6)
    for i in range(2):
        got = eu.to_numpy(out[f"new_cache_{i}"])
        np.testing.assert_allclose(got, eu.to_numpy(new[i]), atol=1e-6)
        # Position 3 written, the others passed through.
        assert not np.allclose(got[:, :, 3], x[f"cache_{i}"][:, :, 3])
        np.testing.assert_array_equal(
            np.delete(got, 3, axis=2), np.delete(x[f"cache_{i}"], 3, axis=2))


def test_decoding_step_rejects_bad_arguments():
    lm = eu.causal_lm("random")
    with pytest.raises(ValueError, match=r"`max_length`=9 must be in \[1, 8\]"):
        CachedDecodingStep(lm, max_length=9)
    classifier, _ = shared_task("classifier", "random")
    with pytest.raises(ValueError, match="SynthesizerCausalLM"):
        CachedDecodingStep(classifier)


def test_export_rejects_bad_format_and_path(tmp_path):
    model, _ = shared_task("classifier", "dense")
    with pytest.raises(ValueError, match=r"`format` must be one of .*'tflite'"):
        export_model(model, str(tmp_path / "m.tflite"), "tflite")
    with pytest.raises(ValueError, match=r"`path` must end with '\.onnx'"):
        export_model(model, str(tmp_path / "m.tflite"), "onnx")


def test_summarize_is_one_line_of_the_root_cause():
    try:
        try:
            raise ValueError("\x1b[1mop Foo is not supported\x1b[0m\nline two")
        except ValueError as inner:
            raise RuntimeError("Exception encountered when calling X") from inner
    except RuntimeError as error:
        text = summarize(error)
    assert text == "ValueError: op Foo is not supported"
    assert not re.search(r"\x1b|\n", text)


SAVED_MODEL_CASES = ([("classifier", v) for v in eu.VARIANTS]
                     + [(t, "random+vanilla") for t in ("masked_lm",
                                                          "causal_lm")])


@pytest.mark.parametrize("task,variant", SAVED_MODEL_CASES)
def test_saved_model_of_token_ids_matches_keras(task, variant, tmp_path):
    """`format="tf_saved_model"` with an open batch: Keras's ExportArchive
    on TensorFlow, jax2tf on JAX; on PyTorch (Keras converts through
    torch_xla, absent from the CPU wheel) the ImportError naming it."""
    model, x = shared_task(task, variant)
    path = str(tmp_path / "saved_model")
    backend = keras.backend.backend()
    if backend == "torch" and importlib.util.find_spec("torch_xla") is None:
        with pytest.raises(ImportError, match=(
                r"Cannot export .*synthesizer=" + re.escape(repr(variant))
                + r".* format='tf_saved_model' on the torch backend: it "
                r"needs the `torch_xla` module")):
            export_model(model, path, "tf_saved_model", batch_size=None)
        return
    import tensorflow as tf

    export_model(model, path, "tf_saved_model", batch_size=None,
                 num_predictions=eu.PREDICTIONS)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    specs = serve.structured_input_signature[1]
    assert {name: spec.shape.as_list() for name, spec in specs.items()} == {
        name: [None, value.shape[1]] for name, value in x.items()}
    # The batch is open: the two rows, then three (the first repeated).
    # Keras's reference for those rows: its outputs for `x` (the module's
    # one `predict` of the model), taken row by row; no layer of a task
    # mixes the rows of a batch, and a `predict` of the three rows only
    # compiled another predict function for the same rows' outputs.
    expected = shared_keras_outputs(task, variant)["output"]
    for rows in ([0, 1], [0, 1, 0]):
        feed = {name: value[rows] for name, value in x.items()}
        got = serve(**{k: tf.constant(v) for k, v in feed.items()})
        want = expected[rows]
        np.testing.assert_allclose(got["output_0"].numpy(), want,
                                   rtol=1e-4, atol=1e-5)
