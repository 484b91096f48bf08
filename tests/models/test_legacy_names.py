"""Files written by release 0.1.0 name two classes its recipes registered
(`recipes_lm>ByteTokenizer`, `recipes.translate>InverseSqrtSchedule`):
with `keras_synth` imported, and nothing from the recipes, they load as
`SynthesizerByteTokenizer` and `InverseSqrtSchedule`.

The old files are made here from new ones by writing the old names and
configs back into them, exactly as release 0.1.0 wrote them (its
`ByteTokenizer.get_config` and `InverseSqrtSchedule.get_config`)."""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np

import keras_synth  # noqa: F401 (what registers the old names)
from keras_synth.models import InverseSqrtSchedule
from keras_synth.models import SynthesizerByteTokenizer
from keras_synth.models import SynthesizerCausalLM
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerCausalLMPreprocessor
from keras_synth.models import legacy_names

OLD_TOKENIZER = {
    "module": "recipes.lm.tokenizers",
    "class_name": "ByteTokenizer",
    "registered_name": "recipes_lm>ByteTokenizer",
}
OLD_SCHEDULE = {
    "module": "recipes.translate.modeling",
    "class_name": "InverseSqrtSchedule",
    "registered_name": "recipes.translate>InverseSqrtSchedule",
}


def _as_release_0_1_0(value):
    """`value` (a JSON config) with the new classes' entries written as
    release 0.1.0 wrote them."""
    if isinstance(value, list):
        return [_as_release_0_1_0(v) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: _as_release_0_1_0(v) for k, v in value.items()}
    name = value.get("registered_name")
    if name == "keras_synth>SynthesizerByteTokenizer":
        # 0.1.0's get_config: the base config and `lowercase` (False).
        config = dict(value["config"], lowercase=False)
        value = dict(value, config=config, **OLD_TOKENIZER)
    elif name == "keras_synth>InverseSqrtSchedule":
        value = dict(value, **OLD_SCHEDULE)
    return value


def _rewrite_json(path):
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_as_release_0_1_0(config), f, indent=4)


def test_the_old_names_are_aliases_of_the_new_classes():
    assert legacy_names.LEGACY_NAMES == {
        "recipes_lm>ByteTokenizer": SynthesizerByteTokenizer,
        "recipes.translate>InverseSqrtSchedule": InverseSqrtSchedule,
    }
    for name, cls in legacy_names.LEGACY_NAMES.items():
        assert keras.saving.get_registered_object(name) is cls
    # New files name the new classes.
    assert keras.saving.get_registered_name(SynthesizerByteTokenizer) == (
        "keras_synth>SynthesizerByteTokenizer")
    assert keras.saving.get_registered_name(InverseSqrtSchedule) == (
        "keras_synth>InverseSqrtSchedule")


def test_import_keras_synth_alone_registers_them(tmp_path):
    """In a fresh process, from an empty folder: `import keras_synth`
    registers the old names (stand-ins that import `keras_synth.models` on
    first use, `keras_synth._lazy`, which resolve to the package's
    classes); no recipe module is imported."""
    code = (
        "import sys, keras, keras_synth\n"
        "assert 'models' in keras_synth.__all__, keras_synth.__all__\n"
        "from keras_synth import _lazy\n"
        "names = ('recipes_lm>ByteTokenizer',\n"
        "         'recipes.translate>InverseSqrtSchedule')\n"
        "for name in names:\n"
        "    cls = keras.saving.get_registered_object(name)\n"
        "    assert cls.keras_synth_deferred.startswith(\n"
        "        'keras_synth.models'), cls\n"
        "for name in names:\n"
        "    assert _lazy.real_class(name).__module__.startswith(\n"
        "        'keras_synth.models')\n"
        "assert not any(m.split('.')[0] == 'recipes' for m in sys.modules)\n"
    )
    repo = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=repo, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                            env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_byte_level_lm_preset_of_release_0_1_0(tmp_path):
    keras.utils.set_random_seed(0)
    tokenizer = SynthesizerByteTokenizer()
    backbone = SynthesizerCausalLMBackbone(
        vocabulary_size=260, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=10, synthesizer="random",
        dropout=0.0)
    lm = SynthesizerCausalLM(backbone, SynthesizerCausalLMPreprocessor(
        tokenizer, sequence_length=10))
    preset = str(tmp_path / "preset")
    lm.save_to_preset(preset)
    for name in ("tokenizer.json", "preprocessor.json", "task.json"):
        _rewrite_json(os.path.join(preset, name))
    text = open(os.path.join(preset, "preprocessor.json")).read()
    assert "recipes_lm>ByteTokenizer" in text and "keras_synth>Synthesizer"\
        "ByteTokenizer" not in text
    restored = SynthesizerCausalLM.from_preset(preset)
    assert type(restored.preprocessor.tokenizer) is SynthesizerByteTokenizer
    assert restored.preprocessor.tokenizer("é").tolist() == [199, 173]
    assert restored.generate("ab", max_length=8) == lm.generate(
        "ab", max_length=8)


def test_translation_keras_file_of_release_0_1_0(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(
        learning_rate=InverseSqrtSchedule(1e-3, 10), beta_2=0.98),
        loss="mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, verbose=0)
    new, old = str(tmp_path / "new.keras"), str(tmp_path / "old.keras")
    model.save(new)
    with zipfile.ZipFile(new) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                data = json.dumps(_as_release_0_1_0(json.loads(data)))
            target.writestr(item, data)
    with zipfile.ZipFile(old) as archive:
        config = archive.read("config.json").decode()
    assert "recipes.translate>InverseSqrtSchedule" in config
    assert "keras_synth>InverseSqrtSchedule" not in config
    restored = keras.saving.load_model(old)
    optimizer_config = restored.optimizer.get_config()
    assert optimizer_config["learning_rate"]["registered_name"] == (
        "keras_synth>InverseSqrtSchedule")
    assert optimizer_config["learning_rate"]["config"] == {
        "peak": 1e-3, "warmup_steps": 10}
    # The optimizer continues where it stopped (one step: lr at step 1).
    assert int(keras.ops.convert_to_numpy(restored.optimizer.iterations)) == 1
    np.testing.assert_allclose(
        float(keras.ops.convert_to_numpy(restored.optimizer.learning_rate)),
        1e-3 * 2 / 10, rtol=1e-6)
