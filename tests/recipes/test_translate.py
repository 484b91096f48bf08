"""The translation recipe on TensorFlow: tokenization, the model, cached
beam search, tensorflow_datasets under mock_data, and a tiny end-to-end run
(train, resume, decode, score, export, reload)."""

import itertools
import json
import os

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "recipes.translate runs on the TensorFlow backend (tf.data, "
        "tf.distribute, tf.while_loop decoding, SavedModel); its pure-Python "
        "parts are tested in test_translate_data.py on every backend",
        allow_module_level=True,
    )

import tensorflow as tf  # noqa: E402

from recipes.core import run_directory  # noqa: E402
from recipes.core import vocabulary  # noqa: E402
from recipes.translate import data as data_lib  # noqa: E402
from recipes.translate import decoding  # noqa: E402
from recipes.translate import model as model_lib  # noqa: E402
from recipes.translate import train as train_lib  # noqa: E402

VOCAB = list(vocabulary.RESERVED_TOKENS) + [
    "ein", "hund", "a", "dog", "runs", "läuft", "##s", ".", ",", "-", "'",
    "t", "shirt", "man", "Ein", "A"]


def test_preprocessor_and_detokenization():
    pre = model_lib.Preprocessor(VOCAB, VOCAB, max_length=5)
    ids, truncated = pre.encoder_inputs(tf.constant(
        ["Ein hund läuft.", "ein hund läuft , ein hund läuft"]))
    index = VOCAB.index
    assert ids.numpy().tolist() == [
        [index("Ein"), index("hund"), index("läuft"), index("."), 0],
        [index("ein"), index("hund"), index("läuft"), index(","),
         index("ein")]]
    assert truncated.numpy().tolist() == [False, True]
    # Detokenization stops at [SEP], drops [CLS]/[PAD], joins pieces and
    # punctuation as written text.
    target = [[pre.bos_id] + [index(t) for t in [
        "A", "man", "'", "##s", "t", "-", "shirt", ",", "a", "dog", "."]]
        + [pre.eos_id, index("dog"), 0]]
    assert pre.detokenize(tf.constant(target)).numpy().tolist() == [
        b"A man's t-shirt, a dog."]


def test_encode_corpus_drops_long_pairs_and_counts_them():
    pre = model_lib.Preprocessor(VOCAB, VOCAB, max_length=4)
    pairs = data_lib.Parallel(
        ["ein hund", "ein hund läuft . .", "ein", "ein hund"],
        ["a dog", "a dog", "a dog runs .", "a"])
    encoded = model_lib.encode_corpus(pre, pairs)
    # Pair 2: source too long (5 > 4); pair 3: target + [SEP] too long.
    assert (encoded["kept"], encoded["dropped"]) == (2, 2)
    index = VOCAB.index
    assert encoded["src"].tolist() == [
        [index("ein"), index("hund"), 0, 0], [index("ein"), index("hund"),
                                              0, 0]]
    assert encoded["tgt_in"].tolist() == [
        [pre.bos_id, index("a"), index("dog"), 0], [pre.bos_id, index("a"),
                                                    0, 0]]
    assert encoded["tgt_out"].tolist() == [
        [index("a"), index("dog"), pre.eos_id, 0], [index("a"), pre.eos_id,
                                                    0, 0]]
    batch = next(iter(model_lib.make_dataset(encoded, 2)))
    inputs, labels, weights = batch
    # Cut to the longest sequence of the batch.
    assert inputs["encoder_token_ids"].shape == (2, 2)
    assert labels.shape == (2, 3)
    assert weights.numpy().tolist() == [[1, 1, 1], [1, 1, 0]]


def test_smoothed_loss_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    labels = np.array([[1, 2, 0], [3, 0, 0]])
    weights = (labels != 0).astype("float32")
    loss = model_lib.SmoothedCrossEntropy(0.1)(labels, logits, weights)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    per_token = 0.9 * nll + 0.1 * -log_p.mean(-1)
    expected = (per_token * weights).sum() / weights.sum()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_inverse_sqrt_schedule():
    schedule = model_lib.InverseSqrtSchedule(1e-3, warmup_steps=100)
    assert float(schedule(49)) == pytest.approx(5e-4)
    assert float(schedule(99)) == pytest.approx(1e-3)
    assert float(schedule(399)) == pytest.approx(5e-4)


# ---------------------------------------------------------------- search


def brute_force(log_probs_of, vocab_size, eos_id, max_length, alpha):
    """Best sequence by exhaustive search; `log_probs_of(prefix)`."""
    best, best_score = None, -np.inf
    for n in range(1, max_length):
        for body in itertools.product(
                [t for t in range(3, vocab_size)], repeat=n - 1):
            prefix, total = [1], 0.0
            for token in body + (eos_id,):
                total += log_probs_of(prefix)[token]
                prefix = prefix + [token]
            score = total / ((5.0 + n) / 6.0) ** alpha
            if score > best_score:
                best, best_score = prefix, score
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_search_is_exact_with_a_wide_beam(alpha):
    # A toy "model": logits from a fixed table indexed by (position, last
    # token); [PAD] and [CLS] impossible. With a beam as wide as the number
    # of hypotheses, beam search must return the brute-force optimum.
    vocab_size, eos_id, max_length = 5, 2, 5
    rng = np.random.default_rng(int(alpha * 10))
    table = rng.normal(scale=1.5, size=(max_length, vocab_size,
                                        vocab_size)).astype("float32")
    table[..., :2] = -1e4

    def logits_of(prefix):
        return table[len(prefix) - 1, prefix[-1]]

    def log_probs_of(prefix):
        x = logits_of(prefix)
        return x - np.log(np.exp(x - x.max()).sum()) - x.max()

    def step(sequences, index, state):
        last = tf.gather(sequences, index, axis=1)
        return tf.gather(tf.constant(table)[index], last), state

    first = tf.constant(np.stack([logits_of([1])] * 2))
    result = decoding.beam_search(step, first, (), 1, eos_id, max_length,
                                  beam_size=27, length_penalty=alpha)
    expected = brute_force(log_probs_of, vocab_size, eos_id, max_length,
                           alpha)
    for row in result.numpy().tolist():
        assert row[: len(expected)] == expected
        assert all(t == 0 for t in row[len(expected):])
    # Greedy decoding follows the argmax.
    greedy = decoding.greedy_search(step, first, (), 1, eos_id, max_length)
    prefix = [1]
    while len(prefix) < max_length and prefix[-1] != eos_id:
        prefix.append(int(np.argmax(logits_of(prefix))))
    assert greedy.numpy()[0].tolist()[: len(prefix)] == prefix


def tiny_model(synthesizer, vocab_size=23, max_length=10, seed=0):
    keras.utils.set_random_seed(seed)
    model = model_lib.SynthesizerTranslator(
        vocab_size, vocab_size, max_length, synthesizer=synthesizer,
        hidden_dim=16, num_layers=2, num_heads=2, dropout=0.0,
        normalize_first=True)
    model.build_for()
    # Larger random weights than at initialisation: varied translations.
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(scale=1.0, size=w.shape).astype(
        w.dtype) for w in model.get_weights()])
    return model


# Decoding `[CLS]` alone attends over one key (a softmax over one element,
# which Keras warns about); that is expected here.
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")
@pytest.mark.parametrize("synthesizer", [
    "vanilla", "random", "dense", "random+vanilla"])
def test_cached_search_equals_uncached_search(synthesizer):
    model = tiny_model(synthesizer)
    rng = np.random.default_rng(1)
    source = rng.integers(3, 23, size=(4, 6)).astype("int32")
    source[1, 3:] = 0
    source[3, 1:] = 0
    translations = {}
    # eos_id=-1: no end of sentence, every step up to max_length is
    # decoded (and compared).
    for beam_size, eos_id in ((1, 2), (3, -1)):
        outputs = [
            tf.function(lambda s, c=use_cache: decoding.search(
                model, s, 1, eos_id, beam_size, 0.6, c))(source).numpy()
            for use_cache in (True, False)]
        np.testing.assert_array_equal(outputs[0], outputs[1])
        assert outputs[0][:, 0].tolist() == [1] * 4
        translations[beam_size, eos_id] = outputs[0]
    # One cached step gives the full forward pass's logits.
    encoder_output, mask = model.encode(tf.constant(source))
    prefix = tf.constant(translations[3, -1][:, :4])
    full = model.decode(prefix, encoder_output, mask)
    padded = tf.pad(tf.constant(source), [[0, 0], [0, 4]])
    encoder_output, mask = model.encode(padded)
    self_caches, cross_caches = model.initial_caches(4, 10)
    for index in range(4):
        logits, self_caches, cross_caches = model.decode_step(
            prefix[:, index: index + 1], index, encoder_output, mask,
            self_caches, cross_caches, fill_cross_caches=index == 0)
        np.testing.assert_allclose(logits.numpy(), full[:, index].numpy(),
                                   atol=1e-4)
    # Not a degenerate model: the source changes the logits.
    assert float(np.abs(np.asarray(full[0]) - np.asarray(full[1])).max()
                 ) > 1e-2


# --------------------------------------------------------- tfds (mocked)


def test_tfds_translation_set_under_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=6):
        corpus = data_lib.load_tfds("wmt14_translate", "en", "de")
    assert sorted(corpus) == ["test", "train", "valid"]
    assert all(len(corpus[s]) == 6 for s in corpus)
    assert all(isinstance(t, str) for t in corpus["train"].src)
    with pytest.raises(ValueError, match=r"no ja-en pair.*'de-en'"):
        data_lib.tfds_config("wmt14_translate", "ja", "en")
    with pytest.raises(ValueError, match=r"unknown tensorflow_datasets"):
        data_lib.tfds_config("no_such_dataset_xyz", "de", "en")


# --------------------------------------------------------------- end to end

TINY = ["--src=de", "--tgt=en", "--dataset=builtin", "--max_length=24",
        "--hidden_dim=32", "--num_heads=2", "--num_layers=1",
        "--vocab_size=300", "--batch_size=32", "--max_train_examples=512",
        "--learning_rate=3e-3", "--warmup_steps=10", "--beam_size=2",
        "--decode_batch_size=100", "--verbose=0", "--dropout=0.0"]


def run(argv):
    return train_lib.run(train_lib.build_parser().parse_args(argv),
                         log=lambda *_: None)


def test_end_to_end_train_resume_decode_score_export(tmp_path):
    model_dir = str(tmp_path / "run")
    argv = TINY + ["--synthesizer=random+vanilla", "--no_tensorboard",
                   f"--model_dir={model_dir}"]
    first = run(argv + ["--epochs=1", "--no_export"])
    assert first["resumed_from_epoch"] == 0
    assert first["export"] is None
    # The same run with more epochs resumes after epoch 1.
    results = run(argv + ["--epochs=3"])
    assert results["resumed_from_epoch"] == 1
    history = results["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"]
    with open(os.path.join(model_dir, "results.json")) as f:
        saved = json.load(f)
    assert saved["args"]["synthesizer"] == "random+vanilla"
    assert saved["parameters"] > 0 and saved["tokens_per_second"] > 0
    references = data_lib.load_files(data_lib.builtin_files("de", "en"))
    for split in ("valid", "test"):
        assert saved["decoding"][split]["sentences_per_second"] > 0
        with open(saved["hypotheses"][split], encoding="utf-8") as f:
            hypotheses = f.read().splitlines()
        assert len(hypotheses) == 200
        # The scores are those of the written translations.
        _assert_scores(saved, split, hypotheses, references[split].tgt)
    # Training helped: better than the first epoch's translations.
    assert results["chrf"]["test"] > first["chrf"]["test"]
    # A different configuration is refused.
    with pytest.raises(ValueError, match="different configuration"):
        run(TINY + ["--synthesizer=dense", f"--model_dir={model_dir}",
                    "--epochs=3"])

    # The SavedModel translates like the Keras model.
    test = data_lib.load_files(data_lib.builtin_files("de", "en"))["test"]
    sources = test.src[:6] + ["Ein Hund " * 30]  # the last one is cut
    reloaded = tf.saved_model.load(results["export"])
    outputs = reloaded.signatures["translate"](source=tf.constant(sources))
    exported = [t.decode("utf-8") for t in outputs["translation"].numpy()]
    assert outputs["source_truncated"].numpy().tolist() == [False] * 6 + [
        True]
    vocab = vocabulary.load_vocabulary(os.path.join(model_dir, "vocab.txt"))
    pre = model_lib.Preprocessor(vocab, vocab, 24)
    translator = decoding.Translator(_restore(model_dir, vocab), pre,
                                     beam_size=2)
    expected, stats = translator.translate(sources, batch_size=4)
    assert exported == expected
    assert stats["truncated"] == 1
    assert all(isinstance(t, str) and t for t in exported[:6])


def _assert_scores(results, split, hypotheses, references):
    """`results`' BLEU and chrF of `split` are those of `hypotheses` against
    `references` (sacrebleu, recomputed here)."""
    import sacrebleu

    assert len(references) == len(hypotheses)
    bleu = sacrebleu.corpus_bleu(hypotheses, [list(references)]).score
    chrf = sacrebleu.corpus_chrf(hypotheses, [list(references)]).score
    assert results["bleu"][split] == pytest.approx(bleu, abs=1e-6)
    assert results["chrf"][split] == pytest.approx(chrf, abs=1e-6)
    assert chrf > 0.0


def _restore(model_dir, vocab):
    """The trained model, rebuilt and loaded from the last checkpoint."""
    model = model_lib.SynthesizerTranslator(
        len(vocab), len(vocab), 24, synthesizer="random+vanilla",
        hidden_dim=32, num_layers=1, num_heads=2, dropout=0.0)
    model.build_for()
    model_lib.compile_model(model, 3e-3, 10)
    run_dir = run_directory.RunDirectory(model_dir, run_directory.read_json(
        os.path.join(model_dir, "args.json")))
    assert run_dir.restore(model) == 3
    return model
