"""The translation recipe on TensorFlow: its preprocessor and features
over `keras_synth.models.SynthesizerSeq2SeqLM`, the schedule, batched
translation and tensorflow_datasets under mock_data. The recipe's run
(trained, killed, resumed, decoded, scored, its SavedModel and `.keras`
model reloaded) is tests/recipes/test_harness.py's, on every backend; the
model, the cached searches and the loss are tested in tests/models and
tests/samplers."""

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "these tests of recipes.translate check its TensorFlow parts (tf.data "
        "pipelines, tensorflow-text, the SavedModel) once, on TensorFlow; "
        "the recipe runs, is killed and resumed on every backend in "
        "test_harness.py",
        allow_module_level=True,
    )

import tensorflow as tf  # noqa: E402

from keras_synth.models import InverseSqrtSchedule  # noqa: E402
from recipes.core import parallel_data  # noqa: E402
from recipes.core import seq2seq_model as modeling  # noqa: E402
from recipes.core import vocabulary  # noqa: E402
from recipes.translate import data as data_lib  # noqa: E402

VOCAB = list(vocabulary.RESERVED_TOKENS) + [
    "ein", "hund", "a", "dog", "runs", "läuft", "##s", ".", ",", "-", "'",
    "t", "shirt", "man", "Ein", "A"]
TARGET_VOCAB = list(vocabulary.RESERVED_TOKENS) + ["a", "dog", "runs", "."]


def test_preprocessor_packs_and_detokenizes_as_written():
    pre = modeling.make_preprocessor(VOCAB, VOCAB, max_length=6)
    assert pre.encoder_tokenizer is None  # one vocabulary
    x, _, _ = pre({"encoder_text": tf.constant(["Ein hund läuft."]),
                   "decoder_text": tf.constant(["A dog runs."])})
    index = VOCAB.index
    assert x["encoder_token_ids"].numpy().tolist() == [
        [1, index("Ein"), index("hund"), index("läuft"), index("."), 2]]
    # Case is kept (lowercase=False by default).
    assert x["decoder_token_ids"].numpy().tolist() == [
        [1, index("A"), index("dog"), index("runs"), index("."), 2]]
    # Detokenization drops [CLS]/[SEP], joins pieces and punctuation as
    # written text.
    target = [index(t) for t in [
        "A", "man", "'", "##s", "t", "-", "shirt", ",", "a", "dog", "."]]
    assert pre.tokenizer.detokenize(target) == "A man's t-shirt, a dog."
    separate = modeling.make_preprocessor(VOCAB, TARGET_VOCAB, max_length=6)
    assert separate.encoder_tokenizer.get_vocabulary() == VOCAB
    assert separate.tokenizer.get_vocabulary() == TARGET_VOCAB


def test_encode_corpus_drops_long_pairs_and_counts_them():
    pre = modeling.make_preprocessor(VOCAB, VOCAB, max_length=4)
    pairs = parallel_data.Parallel(
        ["ein hund", "ein hund läuft", "ein", "ein hund", ""],
        ["a dog", "a dog", "a dog runs .", "a", "a"])
    encoded = modeling.encode_corpus(pre, pairs)
    # Pair 1: [CLS] source [SEP] too long (5 > 4); pair 2: [CLS] + target
    # too long; pair 4: an empty source.
    assert (encoded["kept"], encoded["dropped"], encoded["empty"]) == (
        2, 3, 1)
    index = VOCAB.index
    assert encoded["encoder_token_ids"].tolist() == [
        [1, index("ein"), index("hund"), 2], [1, index("ein"), index("hund"),
                                              2]]
    # keras-hub's packing: the decoder's inputs end with [SEP] (unscored).
    assert encoded["decoder_token_ids"].tolist() == [
        [1, index("a"), index("dog"), 2], [1, index("a"), 2, 0]]
    assert encoded["labels"].tolist() == [
        [index("a"), index("dog"), 2, 0], [index("a"), 2, 0, 0]]
    assert (encoded["src_tokens"], encoded["tgt_tokens"]) == (4, 5)
    batch = next(iter(modeling.make_dataset(encoded, 2)))
    inputs, labels, weights = batch
    # Cut to the longest source and target of the batch.
    assert inputs["encoder_token_ids"].shape == (2, 4)
    assert inputs["decoder_token_ids"].shape == (2, 3)
    assert labels.shape == (2, 3)
    assert weights.numpy().tolist() == [[1, 1, 1], [1, 1, 0]]
    static = next(iter(modeling.make_dataset(encoded, 2,
                                             static_shapes=True)))
    assert static[0]["decoder_token_ids"].shape == (2, 4)


def test_bucketed_batches_pad_source_and_target_up_to_the_next_bucket():
    # JAX (recipes.core.lengths): cut lengths padded up to 16, 32, 40.
    pre = modeling.make_preprocessor(VOCAB, VOCAB, max_length=40)
    pairs = parallel_data.Parallel(["ein hund " * 9, "ein"],
                              ["a dog", "a dog runs ."])
    encoded = modeling.encode_corpus(pre, pairs)
    assert encoded["kept"] == 2
    cut = next(iter(modeling.make_dataset(encoded, 2)))
    bucketed = next(iter(modeling.make_dataset(encoded, 2, bucketed=True)))
    # Source: 18 tokens + [CLS] [SEP] -> 32; target: 5 scored -> 16.
    assert cut[0]["encoder_token_ids"].shape == (2, 20)
    assert cut[0]["decoder_token_ids"].shape == (2, 5)
    for key, width in [("encoder_token_ids", 32), ("encoder_padding_mask", 32),
                       ("decoder_token_ids", 16),
                       ("decoder_padding_mask", 16)]:
        assert bucketed[0][key].shape == (2, width), key
        np.testing.assert_array_equal(
            bucketed[0][key].numpy()[:, :cut[0][key].shape[1]],
            cut[0][key].numpy())
        if key.startswith("encoder"):  # padding only
            assert not bucketed[0][key].numpy()[:, 20:].any()
    # The decoder's extra columns (the longest target's [SEP], padding)
    # are never scored: labels and weights are the cut ones, padded.
    assert bucketed[1].shape == bucketed[2].shape == (2, 16)
    for part in (1, 2):
        np.testing.assert_array_equal(bucketed[part].numpy()[:, :5],
                                      cut[part].numpy())
        assert not bucketed[part].numpy()[:, 5:].any()


def test_compile_lm_uses_the_package_schedule():
    lm = modeling.build_lm(len(VOCAB), len(VOCAB), 8, "random",
                           hidden_dim=8, num_layers=1, num_heads=2)
    modeling.compile_lm(lm, 1e-3, warmup_steps=100)
    config = lm.optimizer.get_config()["learning_rate"]
    # A saved model names the package's class (it loads with the wheel).
    assert config["registered_name"] == "keras_synth>InverseSqrtSchedule"
    assert config["config"] == {"peak": 1e-3, "warmup_steps": 100}
    schedule = keras.optimizers.schedules.deserialize(config)
    assert isinstance(schedule, InverseSqrtSchedule)
    assert float(schedule(49)) == pytest.approx(5e-4)
    assert float(schedule(99)) == pytest.approx(1e-3)
    assert float(schedule(399)) == pytest.approx(5e-4)


@pytest.mark.parametrize("vocab", ["shared", "separate"])
def test_translate_batches_by_length_in_input_order(vocab):
    target = VOCAB if vocab == "shared" else TARGET_VOCAB
    keras.utils.set_random_seed(0)
    lm = modeling.build_lm(len(VOCAB), len(target), 8, "random+vanilla",
                           hidden_dim=16, num_layers=1, num_heads=2,
                           dropout=0.0, shared=vocab == "shared")
    modeling.compile_lm(lm, 1e-3, 10, beam_size=2)
    lm.preprocessor = modeling.make_preprocessor(VOCAB, target, 8)
    sources = ["ein hund", "Ein hund läuft .", "ein", "ein hund " * 5]
    outputs, stats = modeling.translate(lm, sources, batch_size=2)
    # Each output is the translation of its own source, whatever the batch.
    assert outputs == [lm.generate([s])[0] for s in sources]
    assert stats["sentences"] == 4 and stats["truncated"] == 1
    messages = []
    modeling.translate(lm, sources, batch_size=3, log=messages.append)
    assert "1 of 4 sources have more than 6 tokens" in messages[0]
    assert "cut to them before decoding" in messages[0]


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
