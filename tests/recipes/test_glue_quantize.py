"""`python -m recipes.glue.quantize`: a classifier preset against its int8
copy on a GLUE split (the built-in task here): the quantized preset
reloads int8, and the reported sizes, metrics and agreement are those of
the two models (recomputed here)."""

import json
import os

import numpy as np
import pytest

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier
from recipes.glue import loading
from recipes.glue import model as model_lib
from recipes.glue import quantize
from recipes.glue import tasks

# `quantize` drops Keras variables: a full garbage collection each
# (tests/conftest.py `frozen_heap`).
pytestmark = pytest.mark.usefixtures("frozen_heap")


def _sizes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    task = tasks.get_task("builtin")
    train, _, _ = loading.load_task_data(task)
    words = sorted({w for (text,) in train.texts
                    for w in text.lower().replace(".", " .").split()})
    vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"] + words
    backbone = SynthesizerBackbone(
        vocabulary_size=len(vocab), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, synthesizer="random+vanilla",
        max_sequence_length=16)
    classifier = SynthesizerTextClassifier(
        backbone, num_classes=2,
        preprocessor=model_lib.make_preprocessor(vocab, 16))
    path = str(tmp_path_factory.mktemp("float") / "preset")
    classifier.save_to_preset(path)
    return path


def test_int8_against_float_on_the_dev_split(preset, tmp_path):
    out = str(tmp_path / "int8")
    code = quantize.main([f"--preset={preset}", "--task=builtin",
                          "--repetitions=1", "--batch_size=64",
                          f"--output_dir={out}"])
    assert code == 0
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    _, evals, _ = loading.load_task_data(tasks.get_task("builtin"))
    dev = evals["dev"]
    assert results["split"] == "dev" and results["examples"] == len(dev)
    tokenizer = SynthesizerTextClassifier.from_preset(
        preset).preprocessor.tokenizer
    longer = sum(len(np.asarray(tokenizer(text))) + 2 > 16
                 for (text,) in dev.texts)
    assert results["sequence_length"] == 16
    assert results["cut_examples"] == longer > 0

    quantized = SynthesizerTextClassifier.from_preset(
        os.path.join(out, "preset"))
    random = quantized.backbone.get_layer(
        "encoder_0").self_attention.synthesizers[0]
    assert str(random.kernel.dtype) == "int8"
    texts = [t for (t,) in dev.texts]
    float_logits = SynthesizerTextClassifier.from_preset(preset).predict(
        texts, verbose=0)
    int8_logits = quantized.predict(texts, verbose=0)
    labels = np.asarray(dev.labels)
    np.testing.assert_allclose(
        results["agreement"],
        np.mean(float_logits.argmax(-1) == int8_logits.argmax(-1)))
    np.testing.assert_allclose(results["float_metrics"]["accuracy"],
                               np.mean(float_logits.argmax(-1) == labels))
    np.testing.assert_allclose(results["int8_metrics"]["accuracy"],
                               np.mean(int8_logits.argmax(-1) == labels))
    np.testing.assert_allclose(
        results["max_abs_logit_difference"],
        np.abs(int8_logits - float_logits).max(), rtol=1e-4, atol=1e-6)
    assert results["reloaded_max_abs_difference"] <= 1e-5
    assert results["float_preset_bytes"] == _sizes(preset)
    assert results["int8_preset_bytes"] == _sizes(os.path.join(out, "preset"))
    assert results["int8_keras_bytes"] == _sizes(
        os.path.join(out, "int8.keras"))
    assert results["int8_keras_bytes"] < results["float_keras_bytes"]
    assert results["int8_sentences_per_second"] > 0
    np.testing.assert_allclose(
        results["speedup"], results["int8_sentences_per_second"]
        / results["float_sentences_per_second"])


@pytest.mark.parametrize("argv, message", [
    (["--split=test"], r"`--split`='test'.*labelled splits \['dev'\]"),
    (["--batch_size=0"], r"`--batch_size` must be positive"),
])
def test_bad_input_is_one_clear_error(preset, tmp_path, capsys, argv,
                                      message):
    import re

    code = quantize.main([f"--preset={preset}", "--task=builtin",
                          f"--output_dir={tmp_path / 'out'}", *argv])
    assert code == 2
    err = capsys.readouterr().err
    assert "python -m recipes.glue.quantize: error:" in err
    assert re.search(message, err), err


def test_a_folder_that_is_not_a_preset_is_refused(tmp_path, capsys):
    assert quantize.main([f"--preset={tmp_path}", "--task=builtin"]) == 2
    assert "is not a preset folder (no config.json" in capsys.readouterr().err


def test_int8_profile_times_every_part(tmp_path, capsys):
    """`python -m recipes.glue.int8_profile` on the suite's backend: one
    row per shape with every part timed, the JSON next to the run; a bad
    `--shapes` is one clear error."""
    import keras

    from recipes.glue import int8_profile

    assert int8_profile.main(
        ["--shapes=16x32,8x24", "--tokens=16", "--batches=2",
         "--repetitions=1", f"--output_dir={tmp_path}"]) == 0
    backend = keras.backend.backend()
    with open(tmp_path / f"int8_profile-{backend}.json") as f:
        results = json.load(f)
    assert results["backend"] == backend
    assert [(r["input_width"], r["output_width"])
            for r in results["rows"]] == [(16, 32), (8, 24)]
    parts = {"float32_ms", "int8_ms", "quantize_inputs_ms", "int8_matmul_ms"}
    for row in results["rows"]:
        assert parts <= set(row) and all(row[p] > 0 for p in parts), row
        if backend == "torch":
            assert "float32_gemm_kernel_ms" in row
    assert f"{backend} 16x32: float32" in capsys.readouterr().out

    with pytest.raises(SystemExit) as exit_info:
        int8_profile.main(["--shapes=16by32"])
    assert exit_info.value.code == 2
    assert ("Argument `--shapes` must be comma-separated INPUTxOUTPUT "
            "widths, e.g. 128x512. Received: --shapes=16by32"
            ) in capsys.readouterr().err
