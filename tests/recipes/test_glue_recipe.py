"""The GLUE recipe in process, on the TensorFlow backend (on JAX and
PyTorch: tests/recipes/test_recipes_on_backends.py)."""

import os

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "these tests of recipes.glue check its TensorFlow parts (tf.data, "
        "tf.distribute, the SavedModel) once, on TensorFlow; the recipe on "
        "every backend: test_harness.py and test_recipes_on_backends.py",
        allow_module_level=True,
    )

import tensorflow as tf  # noqa: E402

from keras_synth.layers import SynthesizerAttention  # noqa: E402
from keras_synth.layers import SynthesizerEncoder  # noqa: E402
from recipes.core import devices  # noqa: E402
from recipes.core import run_directory  # noqa: E402
from recipes.core import storage  # noqa: E402
from recipes.core import training  # noqa: E402
from recipes.core import vocabulary  # noqa: E402
from recipes.glue import loading, tasks  # noqa: E402
from recipes.glue import model as model_lib  # noqa: E402
from recipes.glue import train as train_lib  # noqa: E402
from tests.recipes.glue_files import write_glue_task  # noqa: E402

TINY = ["--max_length=24", "--hidden_dim=16", "--num_heads=2",
        "--num_layers=1", "--vocab_size=200", "--batch_size=16",
        "--verbose=0", "--learning_rate=3e-3"]
VOCAB = list(vocabulary.RESERVED_TOKENS) + [
    "the", "cat", "sat", "on", "mat", "a", "dog", "##s", "."]


def run(argv):
    args = train_lib.build_parser().parse_args(argv)
    return train_lib.run(args, log=lambda *_: None)


def test_preprocessor_packs_one_and_two_segments():
    pre = model_lib.make_preprocessor(VOCAB, sequence_length=10)
    out = model_lib.pack(pre, (tf.constant(["the cat sat"]),
                               tf.constant(["a dogs"])))
    ids = VOCAB.index
    assert out["token_ids"].numpy().tolist() == [[
        ids("[CLS]"), ids("the"), ids("cat"), ids("sat"), ids("[SEP]"),
        ids("a"), ids("dog"), ids("##s"), ids("[SEP]"), 0]]
    assert out["segment_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]]
    assert out["padding_mask"].numpy().tolist() == [[1] * 9 + [0]]
    pre = model_lib.make_preprocessor(VOCAB, sequence_length=5)
    out = model_lib.pack(pre, (tf.constant(["the cat sat on the mat"]),))
    assert out["token_ids"].numpy().tolist() == [[
        ids("[CLS]"), ids("the"), ids("cat"), ids("sat"), ids("[SEP]")]]


@pytest.mark.parametrize("synthesizer", [
    "vanilla", "dense", "random", "factorized_random", "random+vanilla"])
@pytest.mark.parametrize("task_name", ["sst2", "rte", "stsb"])
def test_build_model(synthesizer, task_name):
    task = tasks.get_task(task_name)
    model, probe = model_lib.build_model(
        vocab_size=len(VOCAB), num_classes=task.num_classes,
        num_segments=task.num_segments, sequence_length=12,
        synthesizer=synthesizer, hidden_dim=8, num_layers=2, num_heads=2)
    pre = model_lib.make_preprocessor(VOCAB, 12)
    inputs = model_lib.pack(pre, tuple(tf.constant(["the cat sat", "a dog"])
                                       for _ in range(task.num_segments)))
    logits = model(inputs)
    assert tuple(logits.shape) == (2, task.num_classes)
    for i in range(2):
        block = model.backbone.get_layer(f"encoder_{i}")
        assert isinstance(block, SynthesizerEncoder)
        attention = block.self_attention
        assert isinstance(attention, SynthesizerAttention)
        assert attention.synthesizer == synthesizer
        assert attention.max_length == 12
    # A batch cut to its longest sequence gives the same outputs.
    trimmed = model_lib.trim_batch(inputs)
    assert tuple(trimmed["token_ids"].shape) == (2, 5 if
                                                 task.num_segments == 1
                                                 else 9)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(trimmed)),
                               keras.ops.convert_to_numpy(logits),
                               rtol=1e-5, atol=1e-5)
    scores = probe(inputs)
    assert len(scores) == 2 and scores[0].shape == (2, 2, 12, 12)
    # Padded keys get no attention; rows sum to one.
    mask = inputs["padding_mask"].numpy().astype(bool)
    np.testing.assert_allclose(scores[0].sum(-1)[:, :, 0], 1.0, rtol=1e-5)
    assert np.all(scores[0][~mask[:, None, None, :].repeat(12, 2).repeat(
        2, 1)] == 0)


@pytest.mark.parametrize("synthesizer", ["dense", "random+vanilla"])
def test_bucketed_batches_give_the_outputs_of_full_ones(synthesizer):
    # JAX's batches: cut to the next of 16, 32, 40 (recipes.core.lengths)
    # above the longest sequence; the padding changes no output.
    model, _ = model_lib.build_model(
        vocab_size=len(VOCAB), num_classes=2, num_segments=1,
        sequence_length=40, synthesizer=synthesizer, hidden_dim=8,
        num_layers=2, num_heads=2)
    pre = model_lib.make_preprocessor(VOCAB, 40)
    for text, width in [("the cat sat", 16), (" ".join(["the cat"] * 10),
                                              32),
                        (" ".join(["the cat"] * 18), 40)]:
        inputs = model_lib.pack(pre, (tf.constant([text, "a dog"]),))
        bucketed = model_lib.trim_batch(inputs, bucket_up_to=40)
        assert tuple(bucketed["token_ids"].shape) == (2, width)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(model(bucketed)),
            keras.ops.convert_to_numpy(model(inputs)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("task_name", ["sst2", "stsb"])
def test_compile_model_loss_and_metric(task_name):
    """Cross-entropy and accuracy, or for STS-B the classifier's regression
    defaults (mean squared error, mean absolute error), on logits."""
    task = tasks.get_task(task_name)
    model, _ = model_lib.build_model(
        vocab_size=len(VOCAB), num_classes=task.num_classes,
        num_segments=task.num_segments, sequence_length=12, hidden_dim=8,
        num_layers=1, num_heads=2, dropout=0.0)
    model_lib.compile_model(model, task, 1e-3, total_steps=10)
    pre = model_lib.make_preprocessor(VOCAB, 12)
    inputs = model_lib.pack(pre, tuple(
        tf.constant(["the cat sat", "a dog", "the mat"])
        for _ in range(task.num_segments)))
    outputs = keras.ops.convert_to_numpy(model(inputs))
    if task.is_regression:
        labels = np.array([0.5, 3.0, 4.5], "float32")
        errors = outputs[:, 0] - labels
        expected = {"loss": np.mean(errors ** 2),
                    "mae": np.mean(np.abs(errors))}
    else:
        labels = np.array([0, 1, 1], "int32")
        shifted = outputs - outputs.max(-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        expected = {"loss": -np.mean(log_p[np.arange(3), labels]),
                    "accuracy": np.mean(outputs.argmax(-1) == labels)}
    got = model.evaluate(inputs, labels, batch_size=3, verbose=0,
                         return_dict=True)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, err_msg=key)


@pytest.mark.parametrize("task_name", ["sst2", "mnli", "stsb"])
def test_tfds_loading_with_mock_data(task_name):
    import tensorflow_datasets as tfds

    task = tasks.get_task(task_name)
    with tfds.testing.mock_data(num_examples=4):
        train, evals, tests = loading.load_task_data(task)
    assert len(train) == 4
    assert set(evals) == set(task.eval_splits)
    assert set(tests) == set(task.test_splits)
    assert all(len(t) == task.num_segments and isinstance(t[0], str)
               for t in train.texts)
    if task.is_regression:
        assert all(isinstance(v, float) for v in train.labels)
    else:
        assert all(0 <= v < task.num_classes for v in train.labels)
    assert all(s.labels is None for s in tests.values())


@pytest.mark.parametrize("task_name", tasks.SUPERGLUE_TASKS)
def test_superglue_tfds_loading_with_mock_data(task_name):
    # Mock data: random words; max_value=1 keeps WSC's span indices (and
    # COPA's, WiC's integers) at 0, inside the text.
    import tensorflow_datasets as tfds

    task = tasks.get_task(task_name)
    with tfds.testing.mock_data(num_examples=3, max_value=1):
        train, evals, tests = loading.load_task_data(task)
        raw = list(tfds.as_numpy(tfds.load(task.tfds_name, split="train")))
    assert len(train) == 3
    assert set(evals) == {"dev"} and set(tests) == {"test"}
    fields = [{f: loading._python(example[f]) for f in task.tfds_text}
              for example in raw]
    assert train.texts == [task.segments(f) for f in fields]
    assert all(len(t) == task.num_segments and isinstance(t[0], str)
               for t in train.texts)
    assert train.labels == [int(example["label"]) for example in raw]
    assert all(0 <= v < task.num_classes for v in train.labels)
    assert train.ids == [int(example["idx"]) for example in raw]
    assert tests["test"].labels is None
    if task_name == "wsc":
        assert all("[ " in t[0] and "* " in t[0] for t in train.texts)


def test_superglue_end_to_end_from_jsonl(tmp_path):
    # CB (3 classes, the averaged metric) from SuperGLUE's JSONL files.
    from tests.recipes.superglue_files import write_superglue_task

    write_superglue_task(tmp_path / "superglue", "cb")
    run_dir = str(tmp_path / "run")
    logged = []
    args = train_lib.build_parser().parse_args(
        ["--task=super_glue/cb", "--synthesizer=random+vanilla",
         f"--data_dir={tmp_path / 'superglue'}", f"--model_dir={run_dir}",
         "--epochs=1", "--batch_size=2", "--max_length=24",
         "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
         "--vocab_size=200", "--verbose=0"])
    results = train_lib.run(args, log=logged.append)
    task = tasks.get_task("cb")
    saved = storage.read_json(os.path.join(run_dir, "results.json"))
    assert saved["task"] == "cb" and saved["main_metric"] == "acc_and_f1"
    dev = saved["metrics"]["dev"]
    assert list(dev) == ["acc_and_f1", "accuracy", "macro_f1"]
    assert dev["acc_and_f1"] == pytest.approx(
        (dev["accuracy"] + dev["macro_f1"]) / 2)
    assert "dev_acc_and_f1" in results["history"][0]
    assert any(line.startswith("Evaluation: dev acc_and_f1=")
               for line in logged if isinstance(line, str)), logged
    submission = os.path.join(run_dir, "submission", "CB.jsonl")
    assert saved["submissions"] == {"test": submission}
    lines = open(submission, encoding="utf-8").read().splitlines()
    import json
    assert len(lines) == 1 and json.loads(lines[0])["idx"] == 0
    assert json.loads(lines[0])["label"] in task.labels
    assert os.path.isdir(os.path.join(run_dir, "preset"))
    # Exported as the GLUE tasks are: a pair task's SavedModel.
    assert saved["export"] == os.path.join(run_dir, "export")
    usage = json.dumps(saved["export_usage"])
    assert "sentence1" in usage and "sentence2" in usage
    assert "entailment, contradiction, neutral" in usage


def _reload_and_compare(run_dir, task, argv_model, texts):
    """The SavedModel (raw strings in) agrees with the Keras model."""
    vocab = vocabulary.load_vocabulary(os.path.join(run_dir, "vocab.txt"))
    args = train_lib.build_parser().parse_args(argv_model)
    model, _ = model_lib.build_model(
        vocab_size=len(vocab), num_classes=task.num_classes,
        num_segments=task.num_segments, sequence_length=args.max_length,
        synthesizer=args.synthesizer, hidden_dim=args.hidden_dim,
        num_layers=args.num_layers, num_heads=args.num_heads)
    # The last checkpoint (model and optimizer) of the run.
    model_lib.compile_model(model, task, args.learning_rate, 1,
                            weight_decay=args.weight_decay)
    config = storage.read_json(os.path.join(run_dir, "args.json"))
    assert run_directory.RunDirectory(run_dir, config).restore(model) > 0
    pre = model_lib.make_preprocessor(vocab, args.max_length)
    columns = tuple(tf.constant([t[i] for t in texts])
                    for i in range(task.num_segments))
    expected = keras.ops.convert_to_numpy(model(model_lib.pack(pre,
                                                               columns)))

    # The run's preset takes raw strings and gives the same outputs.
    from keras_synth.models import SynthesizerTextClassifier

    restored = SynthesizerTextClassifier.from_preset(
        os.path.join(run_dir, "preset"))
    np.testing.assert_allclose(
        restored.predict(columns if task.num_segments == 2 else columns[0],
                         verbose=0), expected, rtol=1e-5, atol=1e-5)
    _compare_with_export(run_dir, task, columns, expected)
    return model


def _compare_with_export(run_dir, task, columns, expected):
    loaded = tf.saved_model.load(os.path.join(run_dir, "export"))
    serve = loaded.signatures["serving_default"]
    names = ["sentence"] if task.num_segments == 1 else [
        "sentence1", "sentence2"]
    out = serve(**dict(zip(names, columns)))
    if task.is_regression:
        np.testing.assert_allclose(out["score"].numpy(), expected[:, 0],
                                   rtol=1e-5, atol=1e-5)
        return
    probabilities = tf.nn.softmax(expected).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), probabilities,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["label"].numpy(),
                                  probabilities.argmax(-1))
    assert [s.decode() for s in out["label_name"].numpy()] == [
        task.labels[i] for i in probabilities.argmax(-1)]


def test_sentence_pairs_from_glue_tsv(tmp_path):
    # STS-B: pairs, regression, GLUE's TSV layout, a two-input SavedModel.
    # (Pair classification is covered by test_build_model and the readers;
    # every end-to-end run costs tens of seconds of tracing.)
    task_name = "stsb"
    write_glue_task(tmp_path / "glue", task_name)
    run_dir = str(tmp_path / "run")
    argv = [f"--task={task_name}", "--synthesizer=dense",
            f"--data_dir={tmp_path / 'glue'}", f"--model_dir={run_dir}",
            "--epochs=1", "--batch_size=2"] + TINY[:-3] + ["--verbose=0"]
    results = run(argv)
    task = tasks.get_task(task_name)
    assert list(results["metrics"]["dev"]) == list(task.metrics)
    submission = os.path.join(run_dir, "submission",
                              task.test_splits["test"][2])
    lines = open(submission, encoding="utf-8").read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 2
    texts = [("A man is playing.", "A man plays a flute."),
             ("Mexico has a city.", "Mexico is a city.")]
    _reload_and_compare(run_dir, task, argv, texts)


@pytest.mark.parametrize("argv, message", [
    (["--task=sst3"], r"Unknown GLUE task 'sst3'"),
    (["--task=builtin", "--synthesizer=randum"],
     r"--synthesizer.*Unknown variant 'randum'"),
    (["--task=sst2", "--data_dir={tmp}"], r"no files of task 'sst2'"),
    (["--task=multirc"], r"SuperGLUE's 'multirc' \(argument `--task`\) is "
     r"not supported"),
    (["--task=superglue_rte", "--data_dir={tmp}"],
     r"no files of task 'superglue_rte'.*RTE.train\.jsonl"),
    (["--task=builtin", "--epochs=0"], r"--epochs.*must be positive"),
    (["--task=builtin", "--token_dropout=1"],
     r"--token_dropout.*\[0, 1\).*--token_dropout=1\.0"),
    (["--task=builtin", "--ema_momentum=1.5"],
     r"--ema_momentum.*\(0, 1\).*1\.5"),
    (["--task=builtin", "--hidden_dim=10", "--num_heads=4",
      "--max_train_examples=32"],
     r"`--hidden_dim` must be a multiple of `--num_heads`.*"
     r"--hidden_dim=10, --num_heads=4"),
    (["--task=builtin", "--lora_rank=4"],
     r"`--lora_rank`=4 needs `--preset`"),
    (["--task=builtin", "--lora_rank=0"],
     r"`--lora_rank` must be positive\. Received: --lora_rank=0"),
    (["--task=builtin", "--lora_targets=value"],
     r"`--lora_targets`=value needs `--lora_rank`"),
    (["--task=builtin", "--lora_rank=4", "--lora_targets=value,,key"],
     r"`--lora_targets` must be comma-separated names, none empty\. "
     r"Received: --lora_targets=value,,key"),
    (["--task=builtin", "--steps_per_execution=0"],
     r"`--steps_per_execution` must be positive\. Received: "
     r"--steps_per_execution=0"),
    (["--task=builtin", "--max_train_examples=64", "--batch_size=16",
      "--steps_per_execution=3"],
     r"`--steps_per_execution` must divide the 4 training steps of an "
     r"epoch.*--steps_per_execution=3"),
])
def test_bad_input_is_one_clear_error(tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = train_lib.main(argv + [f"--model_dir={tmp_path / 'run'}",
                                  "--verbose=0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "python -m recipes.glue: error:" in err
    assert "Traceback" not in err
    import re
    assert re.search(message, err), err


@pytest.mark.parametrize("argv, learning_rate, dropout", [
    ([], 1e-3, 0.1),
    (["--lora_rank=4"], 5e-3, 0.0),
    (["--lora_rank=4", "--learning_rate=2e-3", "--dropout=0.2"], 2e-3, 0.2),
    (["--learning_rate=2e-3"], 2e-3, 0.1),
])
def test_lora_defaults(tmp_path, argv, learning_rate, dropout):
    """With --lora_rank the learning rate and dropout default to the LoRA
    sweep's (docs/lora_quantization.md); flags given win."""
    args = train_lib.build_parser().parse_args(["--task=builtin"] + argv)
    train_lib.resolve_lora_defaults(args)
    assert (args.learning_rate, args.dropout) == (learning_rate, dropout)
    help_text = train_lib.build_parser().format_help()
    assert "Default: 0.001; 0.005 with --lora_rank." in help_text


def test_enable_lora_on_named_targets():
    """`--lora_targets`: LoRA on the named layers only (here the token
    embedding too), and an unknown name is an error that lists the layers
    that take LoRA."""
    model, _ = model_lib.build_model(
        vocab_size=len(VOCAB), num_classes=2, num_segments=1,
        sequence_length=12, synthesizer="random+vanilla", hidden_dim=8,
        num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match=(
            r"`--lora_targets`=value,tokens names tokens: not a layer.*"
            r"Expected names among: .*token_embedding")):
        model_lib.enable_lora(model.backbone, 2, ["value", "tokens"])
    names = model_lib.enable_lora(model.backbone, 2,
                                  ["value", "token_embedding"])
    assert names == ["value", "token_embedding"]
    trainable = {w.path.split("/")[-2] + "/" + w.name
                 for w in model.backbone.trainable_weights}
    assert {"token_embedding/lora_embeddings_a",
            "value/lora_kernel_a"} <= trainable, trainable
    assert not any(w.startswith(("query/", "key/", "random/"))
                   for w in trainable), trainable
    vocab_size = model.backbone.vocabulary_size
    width = 8
    adapters = sum(int(np.prod(w.shape))
                   for w in model.backbone.trainable_weights
                   if "lora" in w.name)
    # The embedding's A (vocab x 2) B (2 x width); the value's (Keras's
    # EinsumDense LoRA) A (width x heads x 2) B (2 x head width).
    assert adapters == vocab_size * 2 + 2 * width + width * 2 * 2 + 2 * 4


@pytest.mark.parametrize("precision, jit_compile", [
    ("float16", False), ("bfloat16", False), ("float32", True)])
def test_mixed_precision_and_jit_compile_train(precision, jit_compile):
    task = tasks.get_task("sst2")
    try:
        devices.configure_precision(precision)
        model, _ = model_lib.build_model(
            vocab_size=len(VOCAB), num_classes=2, num_segments=1,
            sequence_length=12, synthesizer="random+vanilla", hidden_dim=8,
            num_layers=1, num_heads=2)
        model_lib.compile_model(model, task, 1e-2, total_steps=4,
                                jit_compile=jit_compile)
        pre = model_lib.make_preprocessor(VOCAB, 12)
        inputs = model_lib.pack(pre, (tf.constant(["the cat sat", "a dog",
                                                   "the mat", "a cat"]),))
        labels = np.array([1, 0, 1, 0], dtype="int32")
        history = model.fit(inputs, labels, batch_size=4, epochs=2,
                            verbose=0)
    finally:
        keras.config.set_dtype_policy("float32")
    losses = history.history["loss"]
    assert all(np.isfinite(losses))
    assert model.get_layer("logits").compute_dtype == "float32"
    if precision == "float16":
        # Dynamic loss scaling, from Model.compile (auto_scale_loss).
        assert isinstance(model.optimizer,
                          keras.optimizers.LossScaleOptimizer)
    else:
        assert not isinstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
    encoder = model.backbone.get_layer("encoder_0")
    expected = "float32" if precision == "float32" else precision
    assert encoder.compute_dtype == expected


def test_ema_weights_are_evaluated_and_restored(tmp_path):
    # --ema_momentum: `fit` ends on the moving average of the weights, and a
    # run restarted after its last checkpoint (no `fit`) gets it back too.
    task = tasks.get_task("sst2")
    momentum = 0.5

    def make_model():
        keras.utils.set_random_seed(1)
        model, _ = model_lib.build_model(
            vocab_size=len(VOCAB), num_classes=2, num_segments=1,
            sequence_length=12, synthesizer="random+vanilla", hidden_dim=8,
            num_layers=1, num_heads=2, dropout=0.0)
        model_lib.compile_model(model, task, 1e-2, total_steps=3,
                                ema_momentum=momentum)
        return model

    pre = model_lib.make_preprocessor(VOCAB, 12)
    inputs = model_lib.pack(pre, (tf.constant(["the cat sat", "a dog",
                                               "the mat", "a cat",
                                               "dogs sat .", "the cat"]),))
    labels = np.array([1, 0, 1, 0, 0, 1], dtype="int32")

    raw, average = [], None

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            nonlocal average
            weights = [np.array(v.numpy()) for v in
                       self.model.trainable_variables]
            raw.append(weights)
            average = weights if average is None else [
                momentum * a + (1 - momentum) * w
                for a, w in zip(average, weights)]

    run_dir = run_directory.RunDirectory(str(tmp_path / "run"), {"test": 1})
    model = make_model()
    model.fit(inputs, labels, batch_size=2, epochs=1, shuffle=False,
              verbose=0, callbacks=[Record()] + run_dir.callbacks(
                  tensorboard=False))
    assert len(raw) == 3
    final = [v.numpy() for v in model.trainable_variables]
    for got, want, last in zip(final, average, raw[-1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert any(not np.allclose(a, r) for a, r in zip(average, raw[-1]))

    restarted = make_model()
    assert run_dir.restore(restarted) == 1
    for got, want in zip(restarted.trainable_variables, raw[-1]):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    training.finalize_weights(restarted)
    for got, want in zip(restarted.trainable_variables, final):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(restarted.predict(inputs, verbose=0),
                               model.predict(inputs, verbose=0), rtol=1e-5)


def _small_sst2_split():
    """SST-2 and a split of 24 short sentences of `VOCAB`'s words."""
    from recipes.glue import tsv

    words = ["the cat sat on the mat .", "a dog sat", "the dogs",
             "a cat sat on a dog .", "the mat", "cat"]
    return tasks.get_task("sst2"), tsv.Split(
        texts=[(w,) for w in words * 4],
        labels=[i % 2 for i in range(24)], ids=None)


def test_token_dropout_is_seeded_and_spares_special_tokens():
    task, split = _small_sst2_split()
    pre = model_lib.make_preprocessor(VOCAB, 12)

    def batches(initial_epoch, token_dropout):
        dataset = model_lib.make_dataset(
            split, pre, 4, task, shuffle=True, seed=3, drop_remainder=True,
            trim=True, epochs=2, initial_epoch=initial_epoch,
            token_dropout=token_dropout)
        return [{k: v.numpy() for k, v in x.items()} for x, _ in dataset]

    plain, dropped = batches(0, 0.0), batches(0, 0.5)
    assert len(plain) == len(dropped) == 12
    cls_sep = [VOCAB.index(vocabulary.CLS), VOCAB.index(vocabulary.SEP)]
    kept = removed = 0
    for a, b in zip(plain, dropped):
        np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
        special = np.isin(a["token_ids"], cls_sep)
        # Only real, non-special tokens leave the mask.
        assert np.all(b["padding_mask"] <= a["padding_mask"])
        assert np.all(b["padding_mask"][special] == 1)
        words_mask = (a["padding_mask"] == 1) & ~special
        kept += int(b["padding_mask"][words_mask].sum())
        removed += int((1 - b["padding_mask"][words_mask]).sum())
    assert 0.3 < removed / (kept + removed) < 0.7
    # Seeded: the same run drops the same tokens; a run resumed after
    # epoch 1 drops what an uninterrupted run drops in epoch 2.
    again, resumed = batches(0, 0.5), batches(1, 0.5)
    for a, b in zip(dropped, again):
        np.testing.assert_array_equal(a["padding_mask"], b["padding_mask"])
    assert len(resumed) == 6
    for a, b in zip(dropped[6:], resumed):
        np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
        np.testing.assert_array_equal(a["padding_mask"], b["padding_mask"])
    with pytest.raises(ValueError, match="token_dropout"):
        model_lib.make_dataset(split, pre, 4, task, token_dropout=0.5)


def test_token_dropout_drops_the_same_tokens_whatever_the_padding():
    """Cut to the longest sequence (TensorFlow, PyTorch), padded up to a
    bucket (JAX) or to --max_length (--pad_to_max_length, XLA, TPUs): the
    same tokens leave the mask, so every backend trains on the same
    inputs (the draws were once made for the padded shape, and JAX runs
    dropped other tokens than TensorFlow's)."""
    task, split = _small_sst2_split()
    pre = model_lib.make_preprocessor(VOCAB, 40)

    def batches(**padding):
        dataset = model_lib.make_dataset(
            split, pre, 4, task, shuffle=True, seed=3, drop_remainder=True,
            epochs=1, token_dropout=0.5, **padding)
        return [{k: v.numpy() for k, v in x.items()} for x, _ in dataset]

    trimmed = batches(trim=True)
    for other in (batches(trim=True, bucketed=True), batches(trim=False)):
        assert len(other) == len(trimmed) == 6
        for a, b in zip(trimmed, other):
            width = a["token_ids"].shape[1]
            assert b["token_ids"].shape[1] > width  # padded further
            np.testing.assert_array_equal(b["padding_mask"][:, :width],
                                          a["padding_mask"])
            assert not b["padding_mask"][:, width:].any()


class Captured(Exception):
    pass


@pytest.mark.parametrize("flags, length", [
    ([], None), (["--jit_compile"], 24), (["--pad_to_max_length"], 24)])
def test_batches_are_padded_to_max_length_under_jit_compile(
        tmp_path, monkeypatch, flags, length):
    from recipes.core import experiment

    def capture(args, run_dir, strategy, build, train_data, *rest, **kw):
        raise Captured(train_data, kw["extra_callbacks"])

    monkeypatch.setattr(experiment, "train_and_evaluate", capture)
    with pytest.raises(Captured) as captured:
        run(["--task=builtin", "--epochs=1", "--max_train_examples=64",
             f"--model_dir={tmp_path / 'run'}"] + TINY + flags)
    train_data, _ = captured.value.args
    inputs, labels = train_data.element_spec
    # One XLA program: every batch (B, --max_length); else cut to the
    # batch's longest sequence (a dynamic length).
    for name in ("token_ids", "padding_mask", "segment_ids"):
        shape = inputs[name].shape.as_list()
        assert shape[1] == length, (name, shape)
        if length is not None:
            assert shape == [16, length], (name, shape)
    assert labels.shape.as_list() == [16]


def test_steps_per_execution_trains_every_step(tmp_path):
    results = run(["--task=builtin", "--epochs=2", "--max_train_examples=64",
                   "--steps_per_execution=2", "--no_export",
                   "--no_tensorboard", f"--model_dir={tmp_path / 'run'}"]
                  + TINY)
    # 4 steps an epoch, 2 per call: all 8 are taken and timed.
    assert results["steps_per_execution"] == 2
    assert results["train_steps"] == results["optimizer_steps"] == 8
    assert results["steps_per_second"] > 0
    assert len(results["history"]) == 2
