"""The language-model recipe on TensorFlow: tokenizers, tensorflow_datasets
under mock_data, scoring every token once, and a tiny end-to-end run
(train, evaluate, sample, export, reload)."""

import json
import math
import os

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "these tests of recipes.lm check its TensorFlow parts (tf.data "
        "pipelines, tensorflow-text, the SavedModel) once, on TensorFlow; "
        "the recipe runs, is killed and resumed on every backend in "
        "test_harness.py",
        allow_module_level=True,
    )

import tensorflow as tf  # noqa: E402

from keras_synth.models import SynthesizerByteTokenizer  # noqa: E402
from keras_synth.models import SynthesizerCausalLM  # noqa: E402
from keras_synth.models import SynthesizerCharTokenizer  # noqa: E402
from recipes.core import data_files  # noqa: E402
from recipes.lm import data as data_lib  # noqa: E402
from recipes.lm import evaluation  # noqa: E402
from recipes.lm import model as model_lib  # noqa: E402
from recipes.lm import tokenizers  # noqa: E402
from recipes.lm import train as train_lib  # noqa: E402

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n\n"


# --------------------------------------------------------------- tokenizers


def test_char_tokenizer_round_trip_and_unknown_characters():
    tokenizer = tokenizers.make_tokenizer("char", TEXT)
    ids = tokenizers.encode_stream(tokenizer, TEXT)
    assert len(ids) == len(TEXT)
    assert tokenizer.detokenize(ids) == TEXT
    unknown = tokenizers.encode_stream(tokenizer, "ROMEO: Zq!\n")
    assert tokenizers.count_unknown(tokenizer, unknown) == 3  # Z, q, !
    assert tokenizer.detokenize(unknown) == "ROMEO: [UNK][UNK][UNK]\n"


def test_byte_tokenizer_round_trip_in_python_and_tensorflow():
    tokenizer = tokenizers.make_tokenizer("byte")
    # The package's byte tokenizer: what a preset names loads with it alone.
    assert type(tokenizer) is SynthesizerByteTokenizer
    text = "Ça va — très bien, 東京!\n"
    ids = tokenizers.encode_stream(tokenizer, text)
    assert ids.tolist() == [4 + b for b in text.encode("utf-8")]
    assert tokenizer.detokenize(ids) == text
    assert tokenizer.detokenize(tf.constant(ids)).numpy().decode() == text
    assert tokenizers.count_unknown(tokenizer, ids) == 0
    # A character cut in half decodes to U+FFFD, not an error.
    assert tokenizer.detokenize(ids[:1]) == "\ufffd"


def test_wordpiece_tokenizer_round_trip_and_stream():
    text = "the dog runs .\nthe cat runs .\n" * 30
    tokenizer = tokenizers.make_tokenizer("wordpiece", text, vocab_size=60,
                                          lowercase=True)
    ids = tokenizers.encode_stream(tokenizer, "the dog runs .\nthe cat .\n")
    sep = tokenizer.token_to_id("[SEP]")
    assert ids.tolist().count(sep) == 2  # one per line
    words = tokenizer.detokenize(ids[:4])
    assert words == "the dog runs ."
    unknown = tokenizers.encode_stream(tokenizer, "the zebra runs .\n")
    assert tokenizers.count_unknown(tokenizer, unknown) == 1


# ----------------------------------------------------------- tfds (mocked)


def test_tfds_lm1b_under_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=6):
        corpus = data_lib.load_tfds("lm1b")
        few = data_lib.load_tfds("lm1b", max_examples=2)
    # mock_data has no split information: every split is read.
    assert sorted(corpus) == ["test", "train", "valid"]
    assert all(corpus[s].count("\n") == 6 for s in corpus)
    assert all(isinstance(corpus[s], str) and corpus[s].strip()
               for s in corpus)
    assert all(few[s].count("\n") == 2 for s in few)


def test_tfds_set_without_text_feature_is_refused():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=2):
        with pytest.raises(data_files.DataError, match=r"no `text` feature"):
            data_lib.load_tfds("mnist")


# ------------------------------------------------------------------ scoring


def tiny_args(**overrides):
    args = train_lib.build_parser().parse_args(
        ["--dataset=builtin", "--sequence_length=8", "--num_layers=1",
         "--hidden_dim=16", "--num_heads=2", "--dropout=0"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize("stride", [None, 3])
def test_evaluation_scores_every_token_once_against_numpy(stride):
    tokenizer = tokenizers.make_tokenizer("char", TEXT)
    lm = model_lib.build_lm(tokenizer, tiny_args(), stream=True)
    ids = tokenizers.encode_stream(tokenizer, TEXT)
    windows, weights = data_lib.eval_windows(ids, 8, stride)
    total, scored = model_lib.evaluate(lm, windows, weights, batch_size=4)
    assert scored == len(TEXT) - 1
    # NumPy: each label's loss from its own window, summed where weighted.
    expected = 0.0
    for window, weight in zip(windows, weights):
        x = window[None, :-1]
        logits = keras.ops.convert_to_numpy(lm(
            {"token_ids": x, "padding_mask": (x != 0).astype("int32")},
            training=False))[0].astype("float64")
        logits -= logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        for j in np.flatnonzero(weight):
            expected -= log_probs[j, window[j + 1]]
    np.testing.assert_allclose(total, expected, rtol=1e-5)
    summary = model_lib.summarize(total, scored, characters=scored)
    assert math.isclose(summary["bits_per_character"],
                        summary["loss"] / math.log(2))


# --------------------------------------------------------------- end to end

TINY = ["--dataset=builtin", "--sequence_length=32", "--num_layers=1",
        "--hidden_dim=32", "--num_heads=2", "--batch_size=32",
        "--max_train_examples=600", "--epochs=2", "--dropout=0",
        "--learning_rate=3e-3", "--verbose=0", "--no_tensorboard",
        "--max_new_tokens=12", "--prompts", "ROMEO:", "NURSE:\nO"]


def run(argv):
    return train_lib.run(train_lib.build_parser().parse_args(argv),
                         log=lambda *_: None)


def test_end_to_end_train_evaluate_sample_export(tmp_path):
    # (Killed mid-epoch and resumed to the same history: test_harness.py.)
    model_dir = tmp_path / "run"
    results = run(TINY + [f"--model_dir={model_dir}"])
    assert results["resumed_from_epoch"] == 0
    assert [h["epoch"] for h in results["history"]] == [1, 2]
    assert results["history"][-1]["loss"] < results["history"][0]["loss"]
    # fit's per-token validation metric is the evaluation's mean loss.
    np.testing.assert_allclose(results["history"][-1]["val_token_loss"],
                               results["evaluation"]["valid"]["loss"],
                               rtol=1e-4)
    valid = results["evaluation"]["valid"]
    corpus = data_lib.load_files(data_lib.builtin_files())
    assert valid["tokens"] == len(corpus["valid"]) - 1
    assert valid["bits_per_character"] == pytest.approx(
        valid["loss"] / math.log(2) * valid["tokens"] / valid["characters"])
    assert "non-overlapping windows of 32 tokens" in (
        results["evaluation"]["method"])
    assert [s["prompt"] for s in results["samples"]] == ["ROMEO:",
                                                         "NURSE:\nO"]
    assert all(s["text"].startswith(s["prompt"]) for s in results["samples"])
    # One batch: every sample ends --max_new_tokens after the longest prompt.
    assert [len(s["text"]) for s in results["samples"]] == [20, 20]
    assert not results["generation"]["capped_by_context"]
    assert results["generation"]["tokens_per_second"] > 0
    assert results["tokens_per_second"] == pytest.approx(
        results["steps_per_second"] * 32 * 32)
    assert os.path.isfile(model_dir / "attention.png")
    saved = json.loads((model_dir / "results.json").read_text())
    assert saved["evaluation"]["valid"]["loss"] == valid["loss"]

    # The keras-hub preset: the trained model with its tokenizer, naming
    # only classes of the package (it loads with the wheel alone).
    assert results["preset"] == str(model_dir / "preset")
    for name in os.listdir(results["preset"]):
        if name.endswith(".json"):
            text = (model_dir / "preset" / name).read_text()
            assert "recipes" not in text, name
    preset = SynthesizerCausalLM.from_preset(results["preset"])
    assert isinstance(preset.preprocessor.tokenizer, SynthesizerCharTokenizer)
    args = train_lib.build_parser().parse_args(
        TINY + [f"--model_dir={model_dir}"])
    windows, weights = evaluation.encode_splits(
        preset.preprocessor.tokenizer, {"valid": corpus["valid"]},
        args)["valid"]["eval"]
    total, scored = model_lib.evaluate(preset, windows, weights, 64)
    np.testing.assert_allclose(total / scored, valid["loss"], rtol=1e-5)

    # The SavedModel: prompts in, text out.
    reloaded = tf.saved_model.load(str(model_dir / "export"))
    outputs = reloaded.signatures["generate"](
        prompt=tf.constant(["ROMEO:", "JULIET:"]))
    texts = [t.decode("utf-8") for t in outputs["generated"].numpy()]
    assert texts[0].startswith("ROMEO:") and texts[1].startswith("JULIET:")
    assert all(len(t) > len("JULIET:") for t in texts)


def test_bad_arguments_name_the_flag(tmp_path):
    with pytest.raises(ValueError, match=r"--eval_stride` must be at most"):
        run(TINY + ["--eval_stride=33", f"--model_dir={tmp_path}"])
    with pytest.raises(ValueError, match=r"--vocab_file` needs"):
        run(TINY + ["--vocab_file=v.txt", f"--model_dir={tmp_path}"])
    with pytest.raises(ValueError, match=r"--synthesizer"):
        run(TINY + ["--synthesizer=nope", f"--model_dir={tmp_path}"])
    with pytest.raises(ValueError, match=r"--prompts` holds an empty prompt"):
        run(TINY + ["--prompts", "RO", "", f"--model_dir={tmp_path}"])


class Captured(Exception):
    pass


def test_stream_windows_are_static_and_take_the_query_blocked_path(
        tmp_path, monkeypatch):
    from recipes.core import experiment
    from keras_synth.layers.attention import query_blocks

    def capture(args, run_dir, strategy, build, train_data, *rest, **kw):
        raise Captured(build, train_data, strategy)

    monkeypatch.setattr(experiment, "train_and_evaluate", capture)
    with pytest.raises(Captured) as captured:
        run(["--dataset=builtin", "--sequence_length=16", "--num_layers=2",
             "--hidden_dim=16", "--num_heads=2", "--batch_size=8",
             "--max_train_examples=200", "--epochs=1", "--dropout=0",
             "--synthesizer=random", "--verbose=0",
             f"--model_dir={tmp_path / 'run'}"])
    build, train_data, strategy = captured.value.args
    # Every batch of the stream cut has the static shape (B, L).
    x, y, weights = train_data.element_spec
    assert x["token_ids"].shape.as_list() == [8, 16]
    assert x["padding_mask"].shape.as_list() == [8, 16]
    assert y.shape.as_list() == [8, 16]
    assert weights.shape.as_list() == [8, 16]

    # With query blocks of 4 rows, 16 > 2 x 4 positions attend one block
    # at a time in a train step traced for the dataset's element_spec (as
    # a compiled multi-step loop, XLA or a TPU sees it), in both layers;
    # blocks need the static length.
    monkeypatch.setattr(query_blocks, "QUERY_BLOCK", 4)
    calls = []
    blocked = query_blocks.blocked_shared_attention

    def spy(*args, **kwargs):
        calls.append((args[3], kwargs.get("block")))
        return blocked(*args, **kwargs)

    monkeypatch.setattr(query_blocks, "blocked_shared_attention", spy)
    with strategy.scope():
        lm = build()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y, weights):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, lm(x, training=True), weights)
        return loss, tape.gradient(loss, lm.trainable_variables)

    step.get_concrete_function(*train_data.element_spec)
    assert calls == [(16, 4), (16, 4)], calls
    # And it trains (fit's own step).
    with model_lib.without_preprocessor(lm):
        history = lm.fit(train_data, steps_per_epoch=2, epochs=1, verbose=0,
                         shuffle=False)
    assert np.isfinite(history.history["loss"][0])
