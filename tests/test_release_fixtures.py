"""Files saved by release 0.1.0 still load and compute what 0.1.0 computed.

tests/fixtures/release_0_1_0/ holds `.keras` files and presets written by
release 0.1.0 (its README.md says what each is and how it was made), the
fixed inputs and the outputs 0.1.0 computed from them (on TensorFlow), and
every weight. Each case copies its file to `tmp_path`, loads it with
`keras.saving.load_model` or `from_preset` with only `keras_synth`
registered (the recipes are not imported; classes that other test modules
of a whole-suite run registered from `recipes` are hidden), and checks:

- the outputs on the fixed inputs (`rtol=1e-5`, `atol=1e-5` times the
  largest expected value), on every backend;
- the weights: the same names, count and values (exactly);
- greedy generations (the texts), where the artifact generates;
- for fixtures built with `random_initializer=RandomNormal(stddev=0.5)`: a
  fresh layer from the loaded layer's config draws random logits with that
  stddev (not the default 1.0), since loaded weights cannot show it;
- `translate_recipe_optimizer`: the optimizer the `.keras` file's compile
  config names (Adam on `recipes.translate>InverseSqrtSchedule`),
  deserialized, gives the recipe's learning rates (Keras does not compile
  keras-hub tasks on load, so only this reads it).

The two cases that name a class 0.1.0 registered in `recipes`
(`recipes_lm>ByteTokenizer`, `recipes.translate>InverseSqrtSchedule`) load
through the package's aliases of those names
(`keras_synth.models.legacy_names`: `SynthesizerByteTokenizer`,
`InverseSqrtSchedule`).
"""

import json
import pathlib
import shutil
import sys
import traceback
import zipfile

import keras
import numpy as np
import pytest

import keras_synth  # noqa: F401  (registers the package's classes)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "release_0_1_0"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text("utf-8"))
SEED = 1234  # the maker's seed (fresh layers for the initializer check)

CASES = [
    "layer_dense",
    "layer_random",
    "layer_fixed_random",
    "layer_factorized_dense",
    "layer_factorized_random",
    "layer_vanilla",
    "layer_random_vanilla",
    "layer_dense_factorized_random_vanilla",
    "encoder",
    "decoder",
    "classifier_preset",
    "causal_lm_preset",
    "lm_recipe_byte_preset",
    "translate_recipe_model",
    "translate_recipe_optimizer",
]
CASE_NAMES = [c if isinstance(c, str) else c.values[0] for c in CASES]


@pytest.fixture
def only_keras_synth_registered(monkeypatch):
    """Hides the Keras registrations made by modules of `recipes` (other
    test modules import them), as in a process that imported only
    `keras_synth`."""
    registry = keras.saving.get_custom_objects()
    for name, obj in list(registry.items()):
        module = getattr(obj, "__module__", None) or ""
        if module.split(".")[0] == "recipes":
            monkeypatch.delitem(registry, name)


def load_arrays(case):
    with np.load(FIXTURES / f"{case}.npz") as data:
        return {key: data[key] for key in data.files}


def group(arrays, prefix):
    return {key[len(prefix) + 1:]: value for key, value in arrays.items()
            if key.startswith(prefix + ":")}


def numpy_of(value):
    return np.asarray(keras.ops.convert_to_numpy(value))


def copy_artifact(case, folder):
    source = FIXTURES / EXPECTED[case]["file"]
    target = folder / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)
    return target


# ------------------------------------------------------------------ checks


def assert_close(actual, expected, what):
    scale = max(1.0, float(np.max(np.abs(expected))))
    assert actual.shape == expected.shape, (what, actual.shape)
    np.testing.assert_allclose(actual, expected, rtol=1e-5,
                               atol=1e-5 * scale, err_msg=what)


def assert_outputs(outputs, arrays):
    expected = group(arrays, "output")
    assert sorted(outputs) == sorted(expected)
    for key, value in expected.items():
        assert_close(numpy_of(outputs[key]), value, f"output {key!r}")


def assert_weights(model, arrays):
    expected = group(arrays, "weight")
    loaded = {}
    for variable in model.weights:
        assert variable.path not in loaded, f"two weights {variable.path!r}"
        loaded[variable.path] = numpy_of(variable)
    assert len(model.weights) == len(expected)
    assert sorted(loaded) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)


def assert_random_initializer(layer, stddev):
    """A fresh layer from `layer`'s config draws its random logits (and
    factors) with `stddev`: the loaded config kept `random_initializer`."""
    keras.utils.set_random_seed(SEED)
    fresh = type(layer).from_config(layer.get_config())
    fresh.build_from_config(layer.get_build_config())
    stddevs = {w.path: float(np.std(numpy_of(w))) for w in fresh.weights
               if "random" in w.path.split("/", 1)[1]}
    assert stddevs, "no random-logit weights in a fresh layer"
    for name, value in stddevs.items():
        # 72 to 288 draws: within 0.7 * stddev to 1.4 * stddev, while the
        # default initializer (stddev 1.0) is twice as wide.
        assert 0.7 * stddev < value < 1.4 * stddev, (name, value, stddev)


def check_keras_model(case, path, arrays):
    entry = EXPECTED[case]
    model = keras.saving.load_model(path)
    assert_outputs(model(group(arrays, "input")), arrays)
    assert_weights(model, arrays)
    if "random_stddev" in entry:
        assert_random_initializer(model.get_layer(entry["layer_name"]),
                                  entry["random_stddev"])


def check_classifier_preset(case, path, arrays):
    from keras_synth.models import SynthesizerTextClassifier

    classifier = SynthesizerTextClassifier.from_preset(str(path))
    logits = classifier.predict(EXPECTED[case]["texts"], verbose=0)
    assert_outputs({"logits": logits}, arrays)
    assert_weights(classifier, arrays)


def check_causal_lm_preset(case, path, arrays):
    from keras_synth.models import SynthesizerCausalLM

    entry = EXPECTED[case]
    lm = SynthesizerCausalLM.from_preset(str(path))
    assert_outputs({"logits": lm(group(arrays, "input"))}, arrays)
    assert_weights(lm, arrays)
    lm.compile(sampler="greedy")
    generated = lm.generate(entry["prompts"], max_length=entry["max_length"])
    assert [str(text) for text in generated] == entry["generated"]


def check_seq2seq_model(case, path, arrays):
    entry = EXPECTED[case]
    lm = keras.saving.load_model(path)
    assert_outputs({"logits": lm(group(arrays, "input"))}, arrays)
    assert_weights(lm, arrays)
    lm.compile(sampler="greedy")
    generated = lm.generate(entry["sources"])
    assert [str(text) for text in generated] == entry["generated"]


def check_optimizer_in_keras_file(case, path, arrays):
    entry = EXPECTED[case]
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
    optimizer = keras.optimizers.deserialize(
        config["compile_config"]["optimizer"])
    assert type(optimizer).__name__ == entry["optimizer"]
    for name, value in entry["hyperparameters"].items():
        assert float(getattr(optimizer, name)) == pytest.approx(value), name
    rates = []
    for step in entry["steps"]:
        optimizer.iterations.assign(step)
        rates.append(float(numpy_of(optimizer.learning_rate)))
    np.testing.assert_allclose(rates, entry["learning_rates"], rtol=1e-6)


CHECKS = {
    "keras_model": check_keras_model,
    "classifier_preset": check_classifier_preset,
    "causal_lm_preset": check_causal_lm_preset,
    "seq2seq_model": check_seq2seq_model,
    "optimizer_in_keras_file": check_optimizer_in_keras_file,
}


def check(case, path, arrays):
    """Loads the artifact at `path` and compares it with `arrays`; for a
    case needing a recipe class, only that class may be what is missing."""
    entry = EXPECTED[case]
    if entry["kind"] != "keras_model":
        pytest.importorskip("keras_hub")
    try:
        CHECKS[entry["kind"]](case, path, arrays)
    except TypeError as error:
        needs = entry.get("needs", [])
        text = "".join(traceback.format_exception(error))
        if needs and not any(
                f"Could not locate class '{name.split('>')[1]}'" in text
                for name in needs):
            raise AssertionError(
                f"{case}: a TypeError, but not for a missing class of "
                f"{needs}") from error
        raise


# ------------------------------------------------------------------- tests


def test_every_fixture_has_a_case():
    assert sorted(EXPECTED) == sorted(CASE_NAMES)
    for case, entry in EXPECTED.items():
        assert (FIXTURES / entry["file"]).exists(), case
        assert entry["kind"] in CHECKS, case


@pytest.mark.filterwarnings("ignore:`compile\\(\\)` was not called")
@pytest.mark.filterwarnings("ignore:Skipping variable loading for optimizer")
@pytest.mark.parametrize("case", CASES)
def test_release_fixture_loads(case, tmp_path, only_keras_synth_registered):
    arrays = load_arrays(case) if (FIXTURES / f"{case}.npz").exists() else {}
    modules = set(sys.modules)
    check(case, copy_artifact(case, tmp_path), arrays)
    # Nothing imported `recipes` to load it (a package shim must not).
    assert not [m for m in set(sys.modules) - modules
                if m.split(".")[0] == "recipes"]


def rewrite_weights(path, edit):
    """Rewrites the `.keras` zip at `path` with `edit(h5py.File)` applied
    to its weights file."""
    h5py = pytest.importorskip("h5py")
    folder = path.parent / "unzipped"
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        archive.extractall(folder)
    with h5py.File(folder / "model.weights.h5", "r+") as weights:
        edit(weights)
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.write(folder / name, name)


def first_dataset(weights):
    found = []
    weights.visititems(lambda name, item: found.append(item) if (
        hasattr(item, "shape") and item.size) else None)
    return found[0]


@pytest.mark.parametrize("tamper", ["weight", "expected_output", "truncated"])
def test_a_tampered_fixture_fails(tamper, tmp_path):
    """The check is no formality: one weight moved by 1e-3 in the file, an
    expected output moved by 1e-3 or a truncated file each fail it."""
    case = "layer_dense_factorized_random_vanilla"
    path = copy_artifact(case, tmp_path)
    arrays = load_arrays(case)
    check(case, path, arrays)  # sound before the tampering
    failure = AssertionError
    if tamper == "weight":
        def edit(weights):
            dataset = first_dataset(weights)
            value = dataset[()]
            value.flat[0] += 1e-3
            dataset[()] = value
        rewrite_weights(path, edit)
    elif tamper == "expected_output":
        arrays["output:output"] = arrays["output:output"].copy()
        arrays["output:output"].flat[5] += 1e-3
    else:
        path.write_bytes(path.read_bytes()[:-1000])
        failure = Exception  # whatever the zip or HDF5 reader raises
    with pytest.raises(failure):
        check(case, path, arrays)
