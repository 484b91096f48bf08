"""`task.export(path, format=...)`, the call a keras-hub user makes, on
every keras-synth task and backend (`TaskExportMixin`): the artifact
reloads in its runtime (onnxruntime, the LiteRT interpreter,
`tf.saved_model.load`) and matches `predict` of the same inputs; where
neither Keras's path nor `export_model`'s can export, the one clear error.
Run under the suite's KERAS_BACKEND."""

import importlib.util

import keras
import numpy as np
import pytest

from keras_synth.models import ExportError
from tests.models import export_utils as eu

FORMATS = ("onnx", "litert", "tf_saved_model")
SUFFIXES = {"onnx": ".onnx", "litert": ".tflite", "tf_saved_model": ""}
# The module each format's export needs on each backend, and the one its
# reload needs.
CONVERTERS = {
    ("onnx", "tensorflow"): "tf2onnx", ("onnx", "jax"): "jax2onnx",
    ("onnx", "torch"): "onnxscript", ("litert", "tensorflow"): "tensorflow",
    ("litert", "torch"): "litert_torch",
    ("tf_saved_model", "tensorflow"): "tensorflow",
    ("tf_saved_model", "jax"): "tensorflow",
    ("tf_saved_model", "torch"): "torch_xla",
}
RUNTIMES = {"onnx": "onnxruntime", "litert": "ai_edge_litert",
            "tf_saved_model": "tensorflow"}


def installed(module):
    return importlib.util.find_spec(module) is not None


def open_batch(format):
    """Whether the default export keeps the batch open: on TensorFlow
    (Keras's own signature; LiteRT's length fixed), a jax2tf SavedModel
    on JAX."""
    backend = keras.backend.backend()
    return backend == "tensorflow" or (
        backend == "jax" and format == "tf_saved_model")


def run_saved_model(path, x):
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    out = serve(**{k: tf.constant(v) for k, v in x.items()})
    return {k: v.numpy() for k, v in out.items()}


RUNNERS = {"onnx": eu.run_onnx, "litert": eu.run_litert,
           "tf_saved_model": run_saved_model}


def check_matches(format, path, model, x):
    got = RUNNERS[format](path, x)
    want = eu.keras_outputs(model, x)
    pairs = eu.match_outputs(want, got)
    assert len(pairs) == 1
    (expected, actual), = pairs
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


# (format, variant, predict first): the pure random synthesizer too (on
# TensorFlow, LiteRT of an open length could not run it; PyTorch's ONNX
# exporter could not trace its branch on the logits' spread); keras-hub's
# users export fresh or after
# `predict` (Keras's ONNX path fails on both without a signature).
CASES = [(format, variant, False) for format in FORMATS
         for variant in ("random+vanilla", "random")]
CASES.append(("onnx", "random+vanilla", True))


@pytest.mark.parametrize("format,variant,predict_first", CASES)
def test_classifier_export_reloads_and_matches_predict(
        format, variant, predict_first, tmp_path):
    backend = keras.backend.backend()
    model, x = eu.make_task("classifier", variant)
    if predict_first:
        model.predict(x, verbose=0)
    path = str(tmp_path / f"classifier{SUFFIXES[format]}")
    converter = CONVERTERS.get((format, backend))
    if converter is None:  # LiteRT on JAX: the clear error
        with pytest.raises(ExportError) as error:
            model.export(path, format=format, verbose=False)
        message = str(error.value)
        assert "\n" not in message
        for part in ("SynthesizerTextClassifier", f"format={format!r}",
                     f"the {backend} backend",
                     "supports the tensorflow and torch backends only",
                     "KERAS_BACKEND=tensorflow"):
            assert part in message, (part, message)
        return
    if not installed(converter):  # PyTorch: litert_torch, torch_xla
        with pytest.raises(ImportError, match=(
                rf"format={format!r} on the {backend} backend: it needs the "
                rf"`{converter}` module: `pip install ")):
            model.export(path, format=format, verbose=False)
        return
    if not installed(RUNTIMES[format]):
        pytest.skip(f"reloading {format} needs `{RUNTIMES[format]}`")
    model.export(path, format=format, verbose=False)
    rows = [0, 1] if open_batch(format) else [0]
    check_matches(format, path, model, {k: v[rows] for k, v in x.items()})
    if open_batch(format):  # three rows, too
        check_matches(format, path, model,
                      {k: v[[0, 1, 0]] for k, v in x.items()})


@pytest.mark.parametrize("task", ["masked_lm", "causal_lm"])
def test_lm_onnx_export(task, tmp_path):
    """Both language models export to ONNX on every backend (the causal
    LM on JAX since its ranges are `arange(0, n)`: jax2onnx read
    `arange(n)` as a `None` bound) and match `predict`."""
    backend = keras.backend.backend()
    if not installed(CONVERTERS[("onnx", backend)]):
        pytest.skip(f"needs `{CONVERTERS[('onnx', backend)]}`")
    if not installed("onnxruntime"):
        pytest.skip("reloading onnx needs `onnxruntime`")
    model, x = eu.make_task(task, "random+vanilla")
    path = str(tmp_path / "model.onnx")
    # (`num_predictions` fixes mask_positions' length off TensorFlow.)
    batch = 2 if backend == "tensorflow" else 1
    fixed = {"num_predictions": eu.PREDICTIONS} if (
        task == "masked_lm" and backend != "tensorflow") else {}
    model.export(path, format="onnx", verbose=False, **fixed)
    check_matches("onnx", path, model,
                  {k: v[:batch] for k, v in x.items()})


def test_converter_failure_says_what_to_do(tmp_path, monkeypatch):
    """When the converter fails (a cell of docs/export.md's matrix that
    is "no"), `task.export` raises one line that names the task, the
    format and the backend and says to export from another backend."""
    from keras_synth.models import export_formats

    def failing(model, path, format, *args, **kwargs):
        raise ExportError(f"{export_formats.description(model, format)}: "
                          "TypeError: an op the converter lacks",
                          TypeError("an op the converter lacks"))

    backend = keras.backend.backend()
    if not installed(CONVERTERS[("onnx", backend)]):
        pytest.skip(f"needs `{CONVERTERS[('onnx', backend)]}`")
    monkeypatch.setattr(export_formats, "run_export", failing)
    model, _ = eu.make_task("causal_lm", "dense")
    with pytest.raises(ExportError) as error:
        model.export(str(tmp_path / "m.onnx"), format="onnx", verbose=False)
    message = str(error.value)
    assert "\n" not in message
    for part in ("SynthesizerCausalLM", "format='onnx'",
                 f"the {backend} backend", "an op the converter lacks",
                 "export it from another backend", "docs/export.md"):
        assert part in message, (part, message)
    assert isinstance(error.value.original, TypeError)


def test_fixed_shape_arguments(tmp_path):
    """`batch_size=`, `sequence_length=` fix the shapes on any backend;
    with an `input_signature` too they are refused."""
    backend = keras.backend.backend()
    if not (installed(CONVERTERS[("onnx", backend)])
            and installed("onnxruntime")):
        pytest.skip("needs the onnx converter and onnxruntime")
    import onnxruntime

    model, x = eu.make_task("classifier", "dense")
    path = str(tmp_path / "m.onnx")
    model.export(path, format="onnx", verbose=False, batch_size=2,
                 sequence_length=eu.LENGTH)
    session = onnxruntime.InferenceSession(path)
    assert [i.shape for i in session.get_inputs()] == [[2, eu.LENGTH]] * 3
    check_matches("onnx", path, model, x)
    with pytest.raises(ValueError, match="either `input_signature` or "
                                         "batch_size"):
        model.export(path, format="onnx", batch_size=2, input_signature=[
            {k: keras.InputSpec(shape=(2, 8), dtype="int32", name=k)
             for k in x}])


def test_other_formats_are_keras_own(tmp_path):
    """A format keras-synth does not route is Keras's: its own error for
    an unknown name ("tflite": Keras 3.15 calls it "litert"), and
    `.tflite` required for LiteRT as Keras requires it."""
    model, _ = eu.make_task("classifier", "dense")
    with pytest.raises(ValueError, match="Unrecognized format=tflite.*litert"):
        model.export(str(tmp_path / "m.tflite"), format="tflite")
    with pytest.raises(ValueError, match="end with '.tflite'"):
        model.export(str(tmp_path / "m.lite"), format="litert")


def test_seq2seq_saved_model(tmp_path):
    """The encoder-decoder task takes the same route: a SavedModel of its
    four token-id inputs (batch open) that matches `predict`."""
    from keras_synth.models import SynthesizerSeq2SeqBackbone
    from keras_synth.models import SynthesizerSeq2SeqLM

    backend = keras.backend.backend()
    keras.utils.set_random_seed(0)
    backbone = SynthesizerSeq2SeqBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=eu.LENGTH,
        synthesizer="random+vanilla", dropout=0.0)
    model = SynthesizerSeq2SeqLM(backbone, preprocessor=None)
    path = str(tmp_path / "seq2seq")
    if backend == "torch":
        if not installed("torch_xla"):
            with pytest.raises(ImportError, match="`torch_xla` module"):
                model.export(path, verbose=False)
            return
    rng = np.random.default_rng(0)
    mask = (np.arange(eu.LENGTH)[None] < np.array([[8], [5]])).astype("int32")
    x = {
        "encoder_token_ids": rng.integers(1, 20, (2, eu.LENGTH)).astype(
            "int32") * mask,
        "encoder_padding_mask": mask,
        "decoder_token_ids": rng.integers(1, 20, (2, eu.LENGTH)).astype(
            "int32") * mask[::-1],
        "decoder_padding_mask": mask[::-1].copy(),
    }
    model.export(path, verbose=False)
    check_matches("tf_saved_model", path, model, x)
