"""`import keras_synth` stays light, and saved files still load after it.

`import keras_synth` and `keras_synth.layers` import neither keras-hub nor
(on JAX and PyTorch) TensorFlow; the blocks, models and samplers are
imported on first use (`keras_synth._lazy`). Each check runs in a fresh
process on the backend under test, as a user's session would.
"""

import ast
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_synth
from keras_synth import _lazy
from keras_synth.layers import SynthesizerEncoder
from tests.models.model_utils import TEXTS
from tests.models.model_utils import make_classifier

ROOT = pathlib.Path(__file__).resolve().parents[1]
BACKEND = keras.backend.backend()


def run_python(code, *args):
    """Runs `code` in a fresh interpreter on this backend; returns stdout's
    last line as JSON."""
    env = dict(os.environ, KERAS_BACKEND=BACKEND, PYTHONPATH=str(ROOT),
               TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                            cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


LIGHT = """
import json, sys
import keras_synth, keras_synth.layers
from keras_synth.layers import SynthesizerAttention
layer = SynthesizerAttention(num_heads=2, key_dim=4, synthesizer="random",
                             max_length=8)
print(json.dumps({
    "imported": sorted(m for m in ("tensorflow", "keras_hub", "keras_nlp",
                                   "keras_synth.models",
                                   "keras_synth.layers.blocks")
                       if m in sys.modules),
    "dir": sorted(set(dir(keras_synth)) & {"SynthesizerEncoder", "models"}),
}))
"""


def test_import_keras_synth_imports_no_keras_hub_nor_tensorflow():
    report = run_python(LIGHT)
    # TensorFlow is Keras' own import on the TensorFlow backend.
    expected = ["tensorflow"] if BACKEND == "tensorflow" else []
    assert report["imported"] == expected
    assert report["dir"] == ["SynthesizerEncoder", "models"]


def test_layers_import_tensorflow_in_graph_checks_only():
    # The layers use `keras.ops`; the one exception is the run-time checks
    # of a TensorFlow graph (`keras_synth/layers/graph_checks.py`).
    importers = set()
    for path in sorted((ROOT / "keras_synth" / "layers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names]
                     if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [])
            if any(name.split(".")[0] == "tensorflow" for name in names):
                importers.add(path.relative_to(ROOT).as_posix())
    assert importers == {"keras_synth/layers/graph_checks.py"}


LOAD = """
import json, sys
import numpy as np
import keras_synth
import keras

folder = sys.argv[1]
report = {"hub_before_load": "keras_hub" in sys.modules}
encoder_model = keras.saving.load_model(folder + "/encoder.keras")
report["hub_after_load"] = "keras_hub" in sys.modules
x = np.load(folder + "/inputs.npy")
report["encoder"] = keras.ops.convert_to_numpy(encoder_model(x)).tolist()
report["encoder_class"] = type(encoder_model.layers[1]).__module__
classifier = keras.saving.load_model(folder + "/classifier.keras")
texts = json.load(open(folder + "/texts.json"))
report["classifier"] = classifier.predict(texts, verbose=0).tolist()
report["classifier_class"] = type(classifier).__name__
print(json.dumps(report))
"""


GENERIC = """
import json, sys
import keras_synth
hub_first = sys.argv[2] == "keras_hub_first"
if not hub_first:
    assert "keras_hub" not in sys.modules
import keras_hub
import keras_synth
folder = sys.argv[1]
texts = json.load(open(folder + "/texts.json"))
classifier = keras_hub.models.TextClassifier.from_preset(folder + "/preset")
backbone = keras_hub.models.Backbone.from_preset(folder + "/preset")
print(json.dumps({
    "classifier_class": type(classifier).__name__,
    "backbone_class": type(backbone).__name__,
    "classifier": classifier.predict(texts, verbose=0).tolist(),
}))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A functional model with a `SynthesizerEncoder` (`.keras`), a text
    classifier (`.keras` and a preset), and what they compute."""
    folder = tmp_path_factory.mktemp("saved")
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 16))
    outputs = SynthesizerEncoder(intermediate_dim=32, num_heads=2,
                                 synthesizer="random+vanilla",
                                 max_length=8)(inputs)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    np.save(folder / "inputs.npy", x)
    model.save(folder / "encoder.keras")
    classifier = make_classifier("random+vanilla", num_classes=3)
    classifier.save(folder / "classifier.keras")
    classifier.save_to_preset(str(folder / "preset"))
    (folder / "texts.json").write_text(json.dumps(TEXTS))
    return folder, {
        "encoder": keras.ops.convert_to_numpy(model(x)),
        "classifier": classifier.predict(TEXTS, verbose=0),
    }


def test_keras_files_load_after_import_keras_synth_alone(saved):
    folder, expected = saved
    report = run_python(LOAD, folder)
    assert report["hub_before_load"] is False
    assert report["hub_after_load"] is True  # the load imported the blocks
    assert report["encoder_class"] == "keras_synth.layers.blocks.encoder"
    np.testing.assert_allclose(report["encoder"], expected["encoder"],
                               rtol=1e-5, atol=1e-5)
    assert report["classifier_class"] == "SynthesizerTextClassifier"
    np.testing.assert_allclose(report["classifier"], expected["classifier"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", ["keras_synth_first", "keras_hub_first"])
def test_keras_hub_generic_loaders_find_the_classes(saved, order):
    folder, expected = saved
    code = GENERIC if order == "keras_synth_first" else (
        "import keras_hub\n" + GENERIC)
    report = run_python(code, folder, order)
    assert report["classifier_class"] == "SynthesizerTextClassifier"
    assert report["backbone_class"] == "SynthesizerBackbone"
    np.testing.assert_allclose(report["classifier"], expected["classifier"],
                               rtol=1e-5, atol=1e-5)


WITHOUT_KERAS_HUB = """
import json, sys
sys.modules["keras_hub"] = None  # as if not installed
sys.modules["keras_nlp"] = None
import warnings
warnings.simplefilter("error")
import keras
import keras_synth
from keras_synth.layers import SynthesizerAttention
report = {}
for what in ("attribute", "load"):
    try:
        if what == "attribute":
            keras_synth.layers.SynthesizerEncoder
        else:
            keras.saving.load_model(sys.argv[1] + "/encoder.keras")
    except ImportError as error:
        report[what] = str(error)
report["all"] = keras_synth.__all__
print(json.dumps(report))
"""


def test_without_keras_hub_the_blocks_say_what_to_install(saved):
    folder, _ = saved
    report = run_python(WITHOUT_KERAS_HUB, folder)
    for what in ("attribute", "load"):
        assert 'pip install "keras-synth[nlp]"' in report[what], report
    assert report["all"] == ["SynthesizerAttention", "layers", "__version__"]


def test_deferred_table_lists_every_keras_hub_class():
    import keras_synth.models  # noqa: F401  (imports all heavy packages)

    heavy = {}
    for name, obj in keras.saving.get_custom_objects().items():
        module = getattr(obj, "__module__", "")
        if module.startswith(_lazy.HEAVY_PACKAGES):
            heavy[name] = f"{module}:{obj.__name__}"
    assert heavy == _lazy.DEFERRED
    for name in _lazy.DEFERRED:
        assert keras.saving.get_registered_object(name) is \
            _lazy.real_class(name)
    # The lazy attributes resolve to the same classes.
    assert keras_synth.SynthesizerEncoder is SynthesizerEncoder
    assert keras_synth.layers.SynthesizerDecoder is _lazy.real_class(
        "keras_synth>SynthesizerDecoder")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        keras_synth.layers.Nothing  # noqa: B018
