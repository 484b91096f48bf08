"""`export_model` to ONNX, LiteRT and a TensorFlow SavedModel, and
`CachedDecodingStep`, one cached decoding step of a causal LM as a model
with fixed-shape inputs.

Keras's `Model.export(path, format="onnx" | "litert" | "tf_saved_model")`
does the conversion;
this module gives it fixed-shape input signatures for the keras-synth
tasks (token ids in: the task without its preprocessor), runs it on every
backend the pair supports, and turns a converter's failure into one
message that names the task, the synthesizer variant, the format, the
backend and the cause. The measured support matrix is in docs/export.md.
"""

import contextlib
import importlib.util
import os
import re
import warnings

import keras
from keras import ops

from keras_synth.layers.keras_utils import tracing_for_export
from keras_synth.models import generation_utils as utils

FORMATS = ("onnx", "litert", "tf_saved_model")
# A SavedModel is a folder: any name.
SUFFIXES = {"onnx": ".onnx", "litert": ".tflite", "tf_saved_model": ""}

# The converter each (format, backend) pair runs in Keras 3.15, as the
# module that must be importable.
CONVERTERS = {
    ("onnx", "tensorflow"): "tf2onnx",
    ("onnx", "jax"): "jax2onnx",
    ("onnx", "torch"): "onnxscript",
    ("litert", "tensorflow"): "tensorflow",
    ("litert", "torch"): "litert_torch",
    # JAX: jax2tf (part of jax) writes TensorFlow functions; PyTorch:
    # torch.export lowered to StableHLO by torch_xla.
    ("tf_saved_model", "tensorflow"): "tensorflow",
    ("tf_saved_model", "jax"): "tensorflow",
    ("tf_saved_model", "torch"): "torch_xla",
}
PACKAGES = {"tf2onnx": "tf2onnx", "jax2onnx": "jax2onnx",
            "onnxscript": "onnxscript", "tensorflow": "tensorflow",
            "litert_torch": "litert-torch", "torch_xla": "torch_xla"}


class ExportError(RuntimeError):
    """An export that the converter could not do; `original` holds its
    exception (the converter's own traceback is not chained, it runs to
    dozens of lines).

    Example:

    >>> from keras_synth.models import ExportError
    >>> error = ExportError("Cannot export ...: ValueError: op", ValueError("op"))
    >>> str(error), type(error.original).__name__
    ('Cannot export ...: ValueError: op', 'ValueError')
    """

    def __init__(self, message, original=None):
        super().__init__(message)
        self.original = original


def variant_of(model):
    """The synthesizer variant of a task or of a `CachedDecodingStep`."""
    backbone = getattr(model, "backbone", None)
    if backbone is None:
        return "unknown"
    return backbone.get_config().get("synthesizer", "unknown")


def input_specs(model, batch_size=1, sequence_length=None,
                num_predictions=None):
    """Fixed-shape `keras.InputSpec`s of a task's input dict.

    Every input is `(batch_size, sequence_length)` except a masked LM's
    `mask_positions`, `(batch_size, num_predictions)`. `sequence_length`
    defaults to the backbone's `max_sequence_length`, `num_predictions` to
    `sequence_length`.
    """
    if isinstance(model, CachedDecodingStep):
        return model.input_specs()
    if sequence_length is None:
        sequence_length = model.backbone.max_sequence_length
    if num_predictions is None:
        num_predictions = sequence_length
    inputs = model.input
    if not isinstance(inputs, dict):
        raise ValueError(
            f"Argument `model` ({type(model).__name__}) takes "
            f"{type(inputs).__name__} inputs; export_model builds "
            "signatures for the keras-synth tasks' input dicts only."
        )
    return {
        name: keras.InputSpec(
            shape=(batch_size,
                   num_predictions if name == "mask_positions"
                   else sequence_length),
            dtype=tensor.dtype, name=name)
        for name, tensor in inputs.items()
    }


def summarize(error):
    """One line for the deepest exception of `error`'s chain: its type and
    the first line of its message that says something."""
    while error.__cause__ is not None or (
            error.__context__ is not None and not error.__suppress_context__):
        error = error.__cause__ or error.__context__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines
             if not line.startswith("Exception encountered when calling")]
    first = lines[0] if lines else ""
    if len(first) > 300:
        first = first[:300] + " ..."
    return f"{type(error).__name__}: {first}"


def description(model, format):
    """`"Cannot export <task> (synthesizer=...) to format=... on the
    <backend> backend"`, the start of `export_model`'s messages."""
    return (f"Cannot export {type(model).__name__} "
            f"(synthesizer={variant_of(model)!r}) to format={format!r} on "
            f"the {keras.backend.backend()} backend")


def converter_problem(format):
    """Why Keras cannot convert to `format` on this backend, as
    `(exception type, cause)`: `ExportError` where Keras has no converter
    for the pair, `ImportError` where the converter's module is not
    installed; None where it can."""
    backend = keras.backend.backend()
    converter = CONVERTERS.get((format, backend))
    if converter is None:
        supported = sorted(b for f, b in CONVERTERS if f == format)
        return ExportError, (
            f"Keras's {format} export supports the "
            f"{' and '.join(supported)} backends only: export from a "
            f"{' or '.join(supported)} session instead (KERAS_BACKEND="
            f"{supported[0]}; the task's `.keras` file or preset loads "
            "there with the same weights).")
    if importlib.util.find_spec(converter) is None:
        extra = {"torch_xla": "",
                 "litert_torch": " (or `pip install \"keras-synth"
                                 "[litert-torch]\"` in an environment "
                                 "of its own: it pins an older "
                                 "typing_extensions)"}.get(
            converter, " (or `pip install \"keras-synth[export]\"`)")
        return ImportError, (f"it needs the `{converter}` module: "
                             f"`pip install {PACKAGES[converter]}`{extra}.")
    return None


def export_model(model, path, format, input_signature=None, batch_size=1,
                 sequence_length=None, num_predictions=None, verbose=False,
                 **kwargs):
    """Exports a keras-synth task (token ids in) to ONNX, LiteRT or a
    TensorFlow SavedModel.

    `model.export(path, format=format, input_signature=...)` with
    fixed-shape inputs (`input_specs`), under `torch.no_grad()` on the
    PyTorch backend. The task runs without its preprocessor: a text
    classifier's export takes `token_ids`, `segment_ids` and `padding_mask`
    and returns the logits (probabilities when built with
    `activation="softmax"`), a causal LM's `token_ids` and `padding_mask`,
    a masked LM's also `mask_positions`; a `CachedDecodingStep` exports
    one cached decoding step.

    Example (needs `pip install "keras-synth[export]"`):

    ```python
    backbone = keras_synth.models.SynthesizerBackbone(
        vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=8, synthesizer="dense")
    classifier = keras_synth.models.SynthesizerTextClassifier(
        backbone, num_classes=2, preprocessor=None)
    keras_synth.models.export_model(classifier, "classifier.onnx", "onnx")
    session = onnxruntime.InferenceSession("classifier.onnx")
    x = {"token_ids": np.full((1, 8), 7, "int32"),
         "segment_ids": np.zeros((1, 8), "int32"),
         "padding_mask": np.ones((1, 8), "int32")}
    session.run(None, x)[0].shape  # (1, 2), the logits
    ```

    Args:
        model: a `SynthesizerTextClassifier`, `SynthesizerMaskedLM`,
            `SynthesizerCausalLM` or `CachedDecodingStep`.
        path: the file; ends with `.onnx` for ONNX, `.tflite` for LiteRT;
            a folder for a SavedModel.
        format: `"onnx"`, `"litert"` or `"tf_saved_model"` (Keras's
            `ExportArchive`: endpoint `serve` and signature
            `serving_default`; from JAX through jax2tf).
        input_signature: Keras's `input_signature`; defaults to
            `[input_specs(model, batch_size, sequence_length,
            num_predictions)]`.
        batch_size, sequence_length, num_predictions: the fixed shapes of
            the default signature (see `input_specs`); `batch_size=None`
            leaves the batch dimension open (SavedModel; LiteRT and ONNX
            converters want it fixed).
        verbose: passed to `Model.export`.
        **kwargs: passed to `Model.export` (converter options).

    Returns:
        `path`.

    Raises:
        ValueError: a format or path that is not one of the above.
        ImportError: the converter's package is not installed.
        ExportError: the backend cannot export to `format`, or the
            converter failed; the message names the task, the variant,
            the format, the backend and the cause.
    """
    if format not in FORMATS:
        raise ValueError(
            f"Argument `format` must be one of {FORMATS}; got {format!r}.")
    path = str(path)
    if SUFFIXES[format] and not path.endswith(SUFFIXES[format]):
        raise ValueError(
            f"Argument `path` must end with {SUFFIXES[format]!r} for "
            f"format={format!r}; got {path!r}.")
    if input_signature is None:
        input_signature = [input_specs(model, batch_size, sequence_length,
                                       num_predictions)]
    return run_export(model, path, format, input_signature, verbose, **kwargs)


@contextlib.contextmanager
def _litert_torch_x64(format):
    """litert-torch lowers through JAX with 64-bit types on: it turns
    `jax_enable_x64` on when first imported, but Keras's LiteRT export
    restores the previous value after each conversion, so from the second
    conversion in a process on, litert-torch runs without it and writes a
    file MLIR refuses ("'func.call' op operand type mismatch: expected
    ... i32, but provided ... i64"). Turned on for the conversion, and
    back as it was after."""
    if format != "litert" or importlib.util.find_spec("jax") is None:
        yield
        return
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


def run_export(model, path, format, input_signature, verbose=False,
               **kwargs):
    """Keras's own `Model.export` of `model` (never an `export` override:
    `keras.Model.export(model, ...)`) to one of `FORMATS` with
    `input_signature`, as `export_model` runs it: the converter checked
    first, under `torch.no_grad()` on PyTorch, a converter's failure as
    one-line `ExportError`, an ONNX file with ops no ONNX schema defines
    refused and removed. Returns `path`."""
    backend = keras.backend.backend()
    path = str(path)
    what = description(model, format)
    problem = converter_problem(format)
    if problem is not None:
        error_type, cause = problem
        raise error_type(f"{what}: {cause}")
    try:
        with warnings.catch_warnings():
            # The converters' own deprecation notices (tf2onnx's np.object,
            # PyTorch's TorchScript fallback) and jax2onnx's float64
            # constants that JAX truncates: noise to the user, and errors
            # where warnings are.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings(
                "ignore", message="Explicitly requested dtype float64")
            if backend == "torch":
                import torch

                with torch.no_grad(), _litert_torch_x64(format), (
                        tracing_for_export(format)):
                    keras.Model.export(
                        model, path, format=format, verbose=verbose,
                        input_signature=input_signature, **kwargs)
            else:
                with tracing_for_export(format):
                    keras.Model.export(
                        model, path, format=format, verbose=verbose,
                        input_signature=input_signature, **kwargs)
    except Exception as error:  # a converter's failure, summarized
        raise ExportError(f"{what}: {summarize(error)}", error) from None
    if format == "onnx":
        unknown = unconverted_onnx_ops(path)
        if unknown:
            os.remove(path)
            raise ExportError(
                f"{what}: the converter left op(s) "
                f"{', '.join(unknown)} with no ONNX equivalent (ONNX "
                "Runtime refuses the file); removed it.")
    return path


# The fixed-shape arguments of `export_model` that a task's `export`
# also takes.
FIXED_SHAPE_ARGUMENTS = ("batch_size", "sequence_length", "num_predictions")


def open_input_specs(model):
    """The `keras.InputSpec`s Keras's `Model.export` computes for a task's
    inputs: its `keras.Input`s, batch and length open (`None`)."""
    return {
        name: keras.InputSpec(shape=(None,) + tuple(tensor.shape[1:]),
                              dtype=tensor.dtype, name=name)
        for name, tensor in model.input.items()
    }


def task_input_signature(model, format, **fixed_shapes):
    """The input signature `TaskExportMixin.export` gives `format` on this
    backend when the caller gives none (see its docstring)."""
    backend = keras.backend.backend()
    if fixed_shapes:
        return [input_specs(model, **fixed_shapes)]
    if backend == "tensorflow" and format != "litert":
        return [open_input_specs(model)]
    if format == "litert" and backend == "tensorflow" or (
            format == "tf_saved_model" and backend == "jax"):
        return [input_specs(model, batch_size=None)]
    return [input_specs(model)]


class TaskExportMixin:
    """`export(filepath, format=...)` of a keras-synth task: the call a
    keras-hub user makes, on every backend.

    Keras's `Model.export` cannot trace these tasks everywhere from the
    signature it computes itself (the open `(None, None)` shapes of the
    task's `keras.Input`s): on JAX, ONNX fails with Keras's "The model
    provided has never called" (even after `predict`) and a SavedModel
    with jax2tf's "Symbolic dimension comparison ... is inconclusive" (the
    length must be at most `max_sequence_length`); on PyTorch ONNX fails
    the same way and, called once, traces the sequence at length 1 without
    `torch.no_grad()`; on TensorFlow ONNX fails until the model has been
    called. So the export routes deterministically by backend, not by
    trying Keras's own call first and falling back after a failure (a
    failed try costs a trace, may leave a partial file, and would make the
    artifact's shapes depend on whether a converter happened to fail):

    - TensorFlow, `"tf_saved_model"` and `"onnx"`: Keras's path with the
      signature Keras computes for a called model (batch and length
      open); ONNX works without a prior call.
    - TensorFlow, `"litert"`: the batch open, the length fixed at
      `max_sequence_length` (an open length leaves the random
      synthesizers' slice of their attention matrix as a TensorFlow
      (Flex) op that the LiteRT interpreter refuses to run).
    - JAX and PyTorch: `export_model`'s fixed-shape path (batch 1,
      length `max_sequence_length`; a SavedModel on JAX keeps the batch
      open).

    Every route runs Keras's `Model.export` (`run_export`): token ids in,
    the task without its preprocessor, the same outputs as `predict`.
    Formats other than `"onnx"`, `"litert"` and `"tf_saved_model"`
    (`"openvino"`, `"torch"`) go to Keras unchanged. Put the mixin before
    the `keras_hub.models.Task` subclass among a task's bases.
    """

    def export(self, filepath, format="tf_saved_model", verbose=None,
               input_signature=None, **kwargs):
        """Exports the task (token ids in, without its preprocessor) for
        inference, as `keras.Model.export` does, on every backend.

        Example:

        ```python
        classifier.export("classifier.onnx", format="onnx")  # any backend
        session = onnxruntime.InferenceSession("classifier.onnx")
        ```

        Args:
            filepath: the artifact: a folder for `"tf_saved_model"`, a file
                for `"onnx"`, a `.tflite` file for `"litert"`.
            format: `"tf_saved_model"` (default), `"onnx"` or `"litert"`
                (Keras 3.15's name for TFLite); `"openvino"` and `"torch"`
                are Keras's own, unchanged.
            verbose: as in `keras.Model.export`.
            input_signature: as in `keras.Model.export`; given, it is used
                on every backend. Defaults to the routing of the class
                docstring: the open signature on TensorFlow (the length
                fixed for LiteRT), fixed shapes on JAX and PyTorch.
            **kwargs: `batch_size`, `sequence_length` and `num_predictions`
                fix the default signature's shapes on any backend (see
                `input_specs`); the rest go to Keras's converter.

        Raises:
            ValueError: a `.tflite` path missing for `"litert"`, or an
                `input_signature` together with fixed shapes.
            ImportError: the converter's package is not installed (the
                message names it).
            ExportError: neither path exports this task to `format` on
                this backend (LiteRT on JAX, the cells of
                docs/export.md); the message names the task, the
                synthesizer, the format, the backend and what to do.
        """
        if format not in FORMATS:
            return super().export(filepath, format=format, verbose=verbose,
                                  input_signature=input_signature, **kwargs)
        fixed = {name: kwargs.pop(name) for name in FIXED_SHAPE_ARGUMENTS
                 if name in kwargs}
        filepath = str(filepath)
        if SUFFIXES[format] == ".tflite" and not filepath.endswith(".tflite"):
            raise ValueError(
                "The LiteRT export requires the filepath to end with "
                f"'.tflite'. Got: {filepath}")
        if input_signature is None:
            input_signature = task_input_signature(self, format, **fixed)
        elif fixed:
            raise ValueError(
                f"Pass either `input_signature` or {', '.join(fixed)}; got "
                "both.")
        problem = converter_problem(format)
        if problem is not None:  # (LiteRT on JAX: what to do is in it)
            error_type, cause = problem
            raise error_type(f"{description(self, format)}: {cause}")
        try:
            run_export(self, filepath, format, input_signature, verbose,
                       **kwargs)
        except ExportError as error:  # the converter failed
            raise ExportError(
                f"{error} The converter cannot export this task from the "
                f"{keras.backend.backend()} backend: export it from "
                "another backend (docs/export.md's support matrix lists "
                "what each one exports).", error.original) from None


def unconverted_onnx_ops(path):
    """The op types of an ONNX file that no ONNX schema defines (ops a
    converter passed through unconverted, e.g. tf2onnx's
    `XlaDynamicUpdateSlice`), sorted."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    graph = proto.graph
    local = {function.name for function in proto.functions}
    return sorted({
        node.op_type for node in graph.node
        if node.op_type not in local and node.domain in ("", "ai.onnx")
        and not onnx.defs.has(node.op_type)
    })


@keras.saving.register_keras_serializable(package="keras_synth")
class CachedDecodingStep(keras.Model):
    """One cached decoding step of a `SynthesizerCausalLM`, fixed shapes.

    What an on-device generator runs once per token: the logits of the
    token at `cache_update_index` and the caches with its keys/values
    written in, from `causal_lm.call_with_cache`. Its inputs are a dict:
    `token_ids`, `(batch_size, 1)` int32; `cache_update_index`, `(1,)`
    int32; `cache_0 ... cache_{n-1}`, one self-attention cache per block,
    `(batch_size, 1 or 2, max_length, num_heads, head_dim)` float32
    (values only for a pure synthesizer, keys and values with a
    dot-product part; `initial_cache()` gives empty ones). Its outputs
    are `logits`, `(batch_size, 1, vocabulary_size)`, and the updated
    caches `new_cache_0 ...` (output names differ from input names: tf2onnx
    drops an input whose name an output reuses). The generator feeds the caches back, one token at a
    time, from index 0 (or after a prompt pass) up to `max_length - 1`.

    Example:

    >>> import numpy as np, keras_synth
    >>> backbone = keras_synth.models.SynthesizerCausalLMBackbone(
    ...     vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=8, synthesizer="random")
    >>> lm = keras_synth.models.SynthesizerCausalLM(backbone)
    >>> step = keras_synth.models.CachedDecodingStep(lm)
    >>> inputs = step.initial_inputs()
    >>> sorted(inputs)
    ['cache_0', 'cache_update_index', 'token_ids']
    >>> outputs = step(inputs)
    >>> tuple(outputs["logits"].shape), tuple(outputs["new_cache_0"].shape)
    ((1, 1, 20), (1, 1, 8, 2, 4))

    Args:
        causal_lm: a `SynthesizerCausalLM`.
        batch_size: the fixed batch size. Defaults to 1.
        max_length: the caches' length. Defaults to the backbone's
            `max_sequence_length`.
    """

    def __init__(self, causal_lm, batch_size=1, max_length=None, **kwargs):
        super().__init__(**kwargs)
        if not hasattr(causal_lm, "call_with_cache"):
            raise ValueError(
                "Argument `causal_lm` must be a SynthesizerCausalLM (a task "
                f"with `call_with_cache`); got {type(causal_lm).__name__}.")
        backbone = causal_lm.backbone
        if max_length is None:
            max_length = backbone.max_sequence_length
        if not 1 <= max_length <= backbone.max_sequence_length:
            raise ValueError(
                f"Argument `max_length`={max_length} must be in [1, "
                f"{backbone.max_sequence_length}] (the backbone's "
                "max_sequence_length).")
        self.causal_lm = causal_lm
        self.backbone = backbone
        self.batch_size = batch_size
        self.max_length = max_length
        self(self.initial_inputs())  # built: exportable straight away

    def initial_inputs(self):
        """Inputs of the first step: token 0, index 0, empty caches."""
        caches = utils.initial_self_attention_caches(
            self.backbone.transformer_layers, self.batch_size,
            self.max_length, "float32")
        inputs = {
            "token_ids": ops.zeros((self.batch_size, 1), "int32"),
            "cache_update_index": ops.zeros((1,), "int32"),
        }
        for i, cache in enumerate(caches):
            inputs[f"cache_{i}"] = cache
        return inputs

    def input_specs(self):
        """The fixed-shape `keras.InputSpec`s of `initial_inputs()`."""
        return {
            name: keras.InputSpec(shape=tuple(value.shape),
                                  dtype=keras.backend.standardize_dtype(
                                      value.dtype), name=name)
            for name, value in self.initial_inputs().items()
        }

    def call(self, inputs):
        num_blocks = len(self.backbone.transformer_layers)
        cache = tuple(inputs[f"cache_{i}"] for i in range(num_blocks))
        index = ops.reshape(inputs["cache_update_index"], ())
        logits, _, cache = self.causal_lm.call_with_cache(
            inputs["token_ids"], cache, index)
        outputs = {"logits": logits}
        for i, block_cache in enumerate(cache):
            outputs[f"new_cache_{i}"] = block_cache
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update({
            "causal_lm": keras.saving.serialize_keras_object(self.causal_lm),
            "batch_size": self.batch_size,
            "max_length": self.max_length,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["causal_lm"] = keras.saving.deserialize_keras_object(
            config["causal_lm"])
        return cls(**config)
