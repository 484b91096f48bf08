"""`--preset` of recipes.summarize and recipes.dialogue end to end, on the
suite's backend: `recipes.pretrain --objective=span_corruption` writes a
preset (its `main`, in the test process: the recipes as processes are
tested by tests/recipes/test_harness.py), and each recipe fine-tunes from it at tiny sizes. The
model starts from the preset's weights and vocabulary, training changes
them, and results.json holds the scores; a flag that contradicts the
preset is refused (exit 2)."""

import json

import keras
import numpy as np
import pytest

from recipes.pretrain import train as pretrain
# Encoder input of 24 tokens: the preset's max_sequence_length.
PRETRAIN = ["--objective=span_corruption", "--synthesizer=dense+vanilla",
            "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
            "--sequence_length=24", "--vocab_size=300",
            "--max_train_examples=200", "--batch_size=16",
            "--steps_per_epoch=3", "--epochs=1", "--learning_rate=3e-3",
            "--no_tensorboard", "--verbose=0", "--seed=0"]
# The architecture and vocabulary flags are left out: the preset's.
FINE_TUNE = ["--dataset=builtin", "--max_source_length=24",
             "--max_target_length=12", "--max_train_examples=64",
             "--batch_size=16", "--epochs=1", "--warmup_steps=2",
             "--learning_rate=1e-2", "--beam_size=1", "--no_export",
             "--max_decode_examples=16",
             "--no_tensorboard", "--verbose=0", "--seed=0"]
SCORES = {"summarize": ("rouge", ("rouge1", "rouge2", "rougeL")),
          "dialogue": ("scores", ("bleu1", "bleu4", "rougeL"))}


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pretrain") / "run"
    assert pretrain.main(PRETRAIN + [f"--model_dir={run_dir}"]) == 0
    path = run_dir / "preset"
    assert (path / "config.json").is_file()
    return str(path)


def _numpy(weights):
    return {w.path.split("/", 1)[-1]: keras.ops.convert_to_numpy(w)
            for w in weights}


@pytest.mark.parametrize("recipe", ["summarize", "dialogue"])
def test_fine_tunes_from_a_span_corruption_preset(tmp_path, monkeypatch,
                                                  preset, recipe):
    import importlib

    from keras_synth.models import SynthesizerSeq2SeqBackbone
    from recipes.core import presets
    from recipes.core import seq2seq_model as modeling

    train_lib = importlib.import_module(f"recipes.{recipe}.train")
    pretrained = SynthesizerSeq2SeqBackbone.from_preset(preset)
    expected = _numpy(pretrained.weights)
    assert pretrained.get_config()["synthesizer"] == "dense+vanilla"

    # A flag that contradicts the preset: refused before anything runs.
    bad_dir = tmp_path / "bad"
    code = train_lib.main(FINE_TUNE + [f"--preset={preset}",
                                       "--hidden_dim=32",
                                       f"--model_dir={bad_dir}"])
    assert code == 2
    assert not (bad_dir / "results.json").exists()

    built = []
    build_lm = modeling.build_lm

    def capture(*args, **kwargs):
        model = build_lm(*args, **kwargs)
        built.append((model, _numpy(model.backbone.weights)))
        return model

    monkeypatch.setattr(modeling, "build_lm", capture)
    run_dir = tmp_path / "run"
    code = train_lib.main(FINE_TUNE + [f"--preset={preset}",
                                       f"--model_dir={run_dir}"])
    assert code == 0
    assert len(built) == 1
    model, initial = built[0]

    # The model starts from the preset: its architecture, every weight.
    backbone = model.backbone
    config = backbone.get_config()
    assert (config["synthesizer"], config["hidden_dim"],
            config["num_layers"]) == ("dense+vanilla", 16, 1)
    assert sorted(initial) == sorted(expected)
    for path, value in expected.items():
        np.testing.assert_array_equal(initial[path], value, err_msg=path)
    # ... and its vocabulary: the run's vocab.txt is the preset's.
    vocabulary = presets.read_preset(
        preset, ("SynthesizerSeq2SeqBackbone",), "test").vocabulary
    with open(run_dir / "vocab.txt", encoding="utf-8") as f:
        assert [line.rstrip("\n") for line in f] == list(vocabulary)

    # Training changed the weights (it fine-tuned, not only decoded).
    final = _numpy(backbone.weights)
    changed = [p for p in expected
               if not np.array_equal(final[p], initial[p])]
    assert len(changed) > len(expected) // 2, (len(changed), len(expected))

    with open(run_dir / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    key, metrics = SCORES[recipe]
    for split in ("valid", "test"):
        scores = results[key]["greedy"][split]
        for metric in metrics:
            assert 0 <= scores[metric] <= 100, (split, metric, scores)
    assert results["parameters"] == sum(
        int(np.prod(w.shape)) for w in model.trainable_weights)
    assert results["optimizer_steps"] == 64 // 16
