"""Tiny tasks, their inputs and the ONNX / LiteRT runtimes, for the tests
of keras_synth.models.export_formats and the support-matrix script."""

import importlib.util

import keras
import numpy as np

from keras_synth.models import CachedDecodingStep
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerMaskedLM
from keras_synth.models import SynthesizerTextClassifier
from tests.models.model_utils import VOCAB
from tests.models.model_utils import backbone_inputs
from tests.models.model_utils import make_backbone
from tests.models.model_utils import to_numpy  # noqa: F401 (for the tests)

VARIANTS = ("vanilla", "dense", "factorized_dense", "random", "fixed_random",
            "factorized_random", "random+vanilla")
TASKS = ("classifier", "masked_lm", "causal_lm", "decoding_step")
FORMATS = ("onnx", "litert")
BACKENDS = ("tensorflow", "jax", "torch")
LENGTH = 8
BATCH = 2
PREDICTIONS = 3
RUNTIMES = {"onnx": "onnxruntime", "litert": "ai_edge_litert"}


def runtime_missing(format):
    """The runtime package a format's reload needs, if it is missing."""
    module = RUNTIMES[format]
    return module if importlib.util.find_spec(module) is None else None


def causal_lm(variant):
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=LENGTH, synthesizer=variant,
        dropout=0.0)
    return SynthesizerCausalLM(backbone, preprocessor=None)


def make_task(task, variant):
    """`(model, inputs)`: a tiny task of `variant` with random weights and
    a NumPy input dict of the fixed export shapes."""
    keras.utils.set_random_seed(0)
    x = backbone_inputs(BATCH, LENGTH, lengths=[LENGTH, LENGTH - 3])
    if task == "classifier":
        model = SynthesizerTextClassifier(
            make_backbone(variant, LENGTH), num_classes=3, preprocessor=None,
            dropout=0.0, activation="softmax")
    elif task == "masked_lm":
        model = SynthesizerMaskedLM(make_backbone(variant, LENGTH),
                                    preprocessor=None)
        x["mask_positions"] = np.array([[1, 4, 6], [0, 2, 3]], "int32")
    elif task == "causal_lm":
        model = causal_lm(variant)
        x = {"token_ids": x["token_ids"], "padding_mask": x["padding_mask"]}
    elif task == "decoding_step":
        model = CachedDecodingStep(causal_lm(variant), batch_size=BATCH)
        rng = np.random.default_rng(1)
        x = {name: np.asarray(keras.ops.convert_to_numpy(value))
             for name, value in model.initial_inputs().items()}
        for name in x:  # caches filled up to index 3, the 4th token
            if name.startswith("cache_"):
                x[name] = rng.standard_normal(x[name].shape).astype("float32")
        x["token_ids"] = np.array([[7], [9]], "int32")
        x["cache_update_index"] = np.array([3], "int32")
    else:
        raise ValueError(f"unknown task {task!r}")
    return model, x


def keras_outputs(model, x):
    """The reference: `predict` (the step model is called: its index input
    has no batch axis), as a dict of NumPy arrays."""
    if isinstance(model, CachedDecodingStep):
        out = model(x)
        return {k: keras.ops.convert_to_numpy(v) for k, v in out.items()}
    return {"output": np.asarray(model.predict(x, verbose=0))}


def run_onnx(path, x):
    import onnxruntime

    session = onnxruntime.InferenceSession(path)
    feed = {i.name: x[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed)))


def run_litert(path, x):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    [signature] = interpreter.get_signature_list().values()
    # From TensorFlow the inputs keep Keras's names; litert-torch names a
    # dict's entries after the argument: `args_0_token_ids`.
    names = {key: next(n for n in signature["inputs"]
                       if n == key or n.endswith("_" + key)) for key in x}
    runner = interpreter.get_signature_runner()
    outputs = runner(**{names[key]: value for key, value in x.items()})
    return {k: np.asarray(v) for k, v in outputs.items()}


def match_outputs(expected, got):
    """Pairs the runtime's outputs with Keras's: by name where the names
    carry Keras's keys, else by shape (each shape must be unique)."""
    if len(expected) == 1 and len(got) == 1:
        return [(next(iter(expected.values())), next(iter(got.values())))]
    pairs = []
    in_order = dict(zip(sorted(expected), got.values()))
    for key, value in expected.items():
        named = [v for k, v in got.items() if k == key or k.endswith(key)]
        if len(named) != 1:
            named = [v for v in got.values() if v.shape == value.shape]
        if len(named) > 1 and len(got) == len(expected):
            # Outputs named after the exporter's ops (PyTorch's ONNX:
            # `stack_1`, `stack_3`) and of one shape (the decoding step's
            # caches): in the order of Keras's flattened outputs (sorted
            # keys). A wrong order fails the comparison.
            named = [in_order[key]]
        assert len(named) == 1, (key, value.shape, {k: v.shape for k, v in got.items()})
        pairs.append((value, named[0]))
    return pairs
