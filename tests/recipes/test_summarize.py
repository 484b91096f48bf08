"""Tests of recipes.summarize: ROUGE against hand-computed cases, lead-3,
the `document<TAB>summary` reader, the cut counts, the flags and the
tensorflow_datasets loader under mock_data. The end-to-end run (train,
kill, resume, decode, score, export) is test_harness.py's, on every
backend."""

import gzip

import pytest

from recipes.core import text_metrics
from recipes.core.data_files import DataError
from recipes.summarize import data as data_lib
from recipes.summarize import metrics
from recipes.summarize import train as train_lib

# ------------------------------------------------------------------- ROUGE


def test_rouge_n_hand_computed():
    # hypothesis "the cat sat" vs reference "the cat sat on the mat":
    # unigrams 3 of 3 and 3 of 6: P=1, R=1/2, F=2/3; bigrams 2 of 2 and
    # 2 of 5: F = 2 * 1 * 0.4 / 1.4.
    assert text_metrics.rouge_n("the cat sat", "the cat sat on the mat",
                                1) == pytest.approx(2 / 3)
    assert text_metrics.rouge_n("the cat sat", "the cat sat on the mat",
                                2) == pytest.approx(0.8 / 1.4)
    # Clipped counts: "the the the" has one "the" of the reference's two...
    assert text_metrics.rouge_n(
        "the the the", "the cat the",
        1) == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert text_metrics.rouge_n("a b", "c d", 1) == 0.0
    assert text_metrics.rouge_n("a", "a", 2) == 0.0  # no bigram at all
    # Lowercased, punctuation a separator.
    assert text_metrics.rouge_n("The CAT, sat.", "the cat sat", 2) == 1.0


def test_rouge_l_hand_computed():
    # LCS of "a b c d" and "a c b d" is 3 ("a b d" or "a c d"): F = 3/4.
    assert text_metrics.rouge_l("a b c d", "a c b d") == pytest.approx(0.75)
    # LCS 2 ("police killed"), P = 2/4, R = 2/3.
    assert text_metrics.rouge_l("police killed the gunman",
                                "police kill gunman killed") == pytest.approx(
        2 * 0.5 * 0.5 / 1.0)
    assert text_metrics.rouge_l("x y", "z") == 0.0


def test_corpus_rouge_is_the_mean_in_percent():
    scores = text_metrics.rouge(["a b", "c d"], ["a b", "x y"])
    assert scores == {"rouge1": 50.0, "rouge2": 50.0, "rougeL": 50.0}
    assert metrics.describe(scores) == "ROUGE-1/2/L 50.00/50.00/50.00"
    with pytest.raises(ValueError, match="as many summaries"):
        text_metrics.rouge(["a"], [])


@pytest.mark.parametrize("hyp,ref", [
    ("Storm closes 5 schools in Lyon!", "storm shuts schools, Lyon"),
    ("the cat sat on the mat the cat", "the cat was on the mat"),
    ("a b c d e f", "f e d c b a"),
    ("Police killed the gunman.", "the gunman police killed"),
    ("no overlap here", "entirely different words"),
])
def test_rouge_matches_rouge_score(hyp, ref):
    # The package the keras-hub metrics wrap (the `tests` extra installs it).
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    expected = rouge_scorer.RougeScorer(
        ["rouge1", "rouge2", "rougeL"]).score(ref, hyp)
    assert text_metrics.rouge_n(hyp, ref, 1) == pytest.approx(
        expected["rouge1"].fmeasure)
    assert text_metrics.rouge_n(hyp, ref, 2) == pytest.approx(
        expected["rouge2"].fmeasure)
    assert text_metrics.rouge_l(hyp, ref) == pytest.approx(
        expected["rougeL"].fmeasure)


def test_lead3():
    document = ("First one. Second? Third!  Fourth one. Fifth. "
                "Sixth with 3.5 numbers.")
    assert metrics.lead(document) == "First one. Second? Third!"
    assert metrics.lead("Only one sentence") == "Only one sentence"
    assert metrics.lead(document, 1) == "First one."


# ------------------------------------------------------------------- files


def test_read_tsv_plain_and_gzipped(tmp_path):
    text = "A doc. More.\tA summary.\r\nSecond doc.\tSecond.\n"
    plain = tmp_path / "train.tsv"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "train.tsv.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, packed):
        pairs = data_lib.read_tsv(str(path))
        assert pairs.src == ["A doc. More.", "Second doc."]
        assert pairs.tgt == ["A summary.", "Second."]


@pytest.mark.parametrize("line, problem", [
    ("no tab here", "no TAB"), ("\tsummary", "an empty document"),
    ("document\t  ", "an empty summary")])
def test_read_tsv_bad_lines_name_file_and_line(tmp_path, line, problem):
    path = tmp_path / "valid.tsv"
    path.write_text(f"good\tline\n{line}\n", encoding="utf-8")
    with pytest.raises(DataError, match=(
            rf"valid.tsv, line 2: expected `document<TAB>summary`.*"
            rf"{problem}")):
        data_lib.read_tsv(str(path), "valid")
    with pytest.raises(DataError, match="no such file"):
        data_lib.read_tsv(str(tmp_path / "missing.tsv"))


def test_builtin_task():
    corpus = data_lib.load_files(data_lib.builtin_files())
    assert {s: len(p) for s, p in corpus.items()} == {
        "train": 1200, "valid": 100, "test": 100}
    # The summary is not the lead: lead-3 scores far from perfect.
    assert text_metrics.rouge(
        [metrics.lead(d) for d in corpus["valid"].src],
        corpus["valid"].tgt)["rouge2"] < 20


# ------------------------------------------------------------------- flags


def parse(argv):
    return train_lib.build_parser().parse_args(argv)


def test_flags_and_lengths():
    args = parse(["--dataset=builtin", "--max_source_length=40",
                  "--max_target_length=12"])
    train_lib.validate_args(args, check_options=False)
    assert args.max_length == 40
    assert args.model_dir.endswith("builtin-random_vanilla")
    args = parse(["--train_file=t.tsv"])
    train_lib.validate_args(args, check_options=False)
    assert args.dataset == "files"
    for argv, message in [
            (["--valid_file=v.tsv"], "--train_file` is required"),
            (["--dataset=builtin", "--train_file=t.tsv"], "builtin reads"),
            (["--max_target_length=2"], "at least 3")]:
        with pytest.raises(ValueError, match=message):
            train_lib.validate_args(parse(argv), check_options=False)


# ------------------------------------------------- TensorFlow: cuts, tfds


def test_cut_counts():
    pytest.importorskip("tensorflow_text")
    from recipes.core import parallel_data
    from recipes.core import seq2seq_model as modeling

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    pre = modeling.make_preprocessor(vocab, vocab, 6, target_length=4,
                                     truncation="allow")
    pairs = parallel_data.Parallel(
        ["a b", "a b c a b", "a", "a"], ["a", "a", "a b c d", ""])
    encoded = modeling.encode_corpus(pre, pairs, cut=True)
    # Sources of more than 4 tokens, targets of more than 3 are cut; the
    # pair with an empty summary is dropped.
    assert (encoded["kept"], encoded["dropped"], encoded["empty"]) == (3, 1, 1)
    assert (encoded["cut_source"], encoded["cut_target"]) == (1, 1)
    assert encoded["encoder_token_ids"].shape == (3, 6)
    assert encoded["decoder_token_ids"].shape == (3, 4)
    dropped = modeling.encode_corpus(pre, pairs)  # translation's rule
    assert dropped["kept"] == 1 and "cut_source" not in dropped


def test_cnn_dailymail_under_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=4):
        corpus = data_lib.load_tfds("cnn_dailymail")
    assert sorted(corpus) == ["test", "train", "valid"]
    assert all(len(p) == 4 and isinstance(p.src[0], str)
               for p in corpus.values())
    with pytest.raises(ValueError, match="expected one of builtin, files"):
        data_lib.load_tfds("xsum")
