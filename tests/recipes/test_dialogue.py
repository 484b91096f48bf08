"""Tests of recipes.dialogue: BLEU-1/4 and ROUGE-L against hand-computed
cases, PersonaChat's text format (plain, gzipped, malformed), the
(persona + history -> response) examples, the built-in set and the flags.
The end-to-end run (train, kill, resume, respond, score, export) is
test_harness.py's, on every backend."""

import gzip
import math

import pytest

from recipes.core.data_files import DataError
from recipes.dialogue import data as data_lib
from recipes.dialogue import metrics
from recipes.dialogue import train as train_lib

# ----------------------------------------------------------------- metrics


def test_bleu_hand_computed():
    # One unigram precision of 1, brevity penalty exp(1 - 6/3).
    assert metrics.bleu(["the cat sat"], ["the cat sat on the mat"],
                        1) == pytest.approx(100 * math.exp(-1))
    # "a b c d e" vs "a b c d f": n-gram precisions 4/5, 3/4, 2/3, 1/2,
    # same length: BLEU-4 = (1/5) ** (1/4), BLEU-1 = 4/5.
    assert metrics.bleu(["a b c d e"], ["a b c d f"], 4) == pytest.approx(
        100 * 0.2 ** 0.25)
    assert metrics.bleu(["a b c d e"], ["a b c d f"], 1) == pytest.approx(80)
    # Corpus BLEU: counts summed over responses (3 of 4 unigrams).
    assert metrics.bleu(["a b", "c d"], ["a b", "c e"], 1) == pytest.approx(
        75)
    assert metrics.bleu(["i love my dog ."], ["i love my dog ."],
                        4) == pytest.approx(100)


def test_scores_and_what_is_not_computed():
    scores = metrics.score(["a b c d", "x y"], ["a c b d", "z"])
    # ROUGE-L: 3/4 and 0, mean 37.5.
    assert scores["rougeL"] == pytest.approx(37.5)
    assert scores["cider"] is None
    reasons = metrics.not_computed()
    assert "pycocoevalcap" in reasons["cider"]
    if scores["meteor"] is None:  # nltk's WordNet not downloaded
        assert "wordnet" in reasons["meteor"].lower()
    assert metrics.describe(scores).startswith("BLEU-1/4 ")
    with pytest.raises(ValueError, match="as many responses"):
        metrics.score(["a"], [])


# ------------------------------------------------------------------- files

DIALOGUES = (
    "1 your persona: i like dogs.\n"
    "2 your persona: i live in ohio.\n"
    "3 hi !\thello , how are you ?\t\tbye|hello , how are you ?\n"
    "4 where do you live ?\tin ohio .\n"
    "5 do you have pets ?\ta dog .\n"
    "1 partner's persona: i am a cook.\n"
    "2 hey\tyo\n")


def test_read_plain_and_gzipped(tmp_path):
    plain = tmp_path / "train_self_original.txt"
    plain.write_text(DIALOGUES.replace("\n", "\r\n"), encoding="utf-8")
    packed = tmp_path / "train.txt.gz"
    packed.write_bytes(gzip.compress(DIALOGUES.encode("utf-8")))
    for path in (plain, packed):
        first, second = data_lib.read_dialogues(str(path))
        assert first.persona == ["i like dogs.", "i live in ohio."]
        assert first.turns == ["hi !", "hello , how are you ?",
                               "where do you live ?", "in ohio .",
                               "do you have pets ?", "a dog ."]
        assert (second.persona, second.turns) == (["i am a cook."],
                                                  ["hey", "yo"])


def test_examples_persona_and_history(tmp_path):
    path = tmp_path / "valid.txt"
    path.write_text(DIALOGUES, encoding="utf-8")
    dialogues = data_lib.read_dialogues(str(path))
    pairs = data_lib.examples(dialogues, max_history=3)
    assert len(pairs) == 4
    assert pairs.src[0] == "persona: i like dogs. i live in ohio. history: hi !"
    assert pairs.src[2] == ("persona: i like dogs. i live in ohio. history: "
                            "where do you live ? | in ohio . | "
                            "do you have pets ?")
    assert pairs.tgt == ["hello , how are you ?", "in ohio .", "a dog .",
                         "yo"]
    bare = data_lib.examples(dialogues, max_history=1, persona=False)
    assert bare.src[2] == "history: do you have pets ?"


@pytest.mark.parametrize("line, expected", [
    ("hi\tthere", "`N text`"),
    ("3 hi\tthere", "line number 1 .a new dialogue. or 2"),
    ("2 no tab here", "`utterance<TAB>response`"),
    ("2 hi\t ", "both non-empty"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, expected):
    path = tmp_path / "valid_self_original.txt"
    path.write_text(f"1 your persona: x.\n{line}\n", encoding="utf-8")
    with pytest.raises(DataError, match=(
            rf"valid_self_original.txt, line 2: expected .*{expected}")):
        data_lib.read_dialogues(str(path), "valid")
    path.write_text("1 a\tb\n2 your persona: late.\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2: .*persona lines come before"):
        data_lib.read_dialogues(str(path))


def test_split_files(tmp_path):
    (tmp_path / "train_other_revised.txt").write_text("1 a\tb\n")
    (tmp_path / "valid_other_revised.txt.gz").write_bytes(
        gzip.compress(b"1 a\tb\n"))
    files = data_lib.split_files(str(tmp_path), "other", "revised")
    assert sorted(files) == ["train", "valid"]  # test: optional
    assert files["valid"].endswith(".txt.gz")
    with pytest.raises(DataError, match="expected train_self_original.txt"):
        data_lib.split_files(str(tmp_path))
    with pytest.raises(ValueError, match="none_original only"):
        data_lib.split_files(str(tmp_path), "none", "revised")


def test_builtin_set():
    corpus = data_lib.load(data_lib.split_files(data_lib.builtin_dir()), 3)
    assert {s: len(p) for s, p in corpus.items()} == {
        "train": 2501, "valid": 303, "test": 301}
    assert all(s.startswith("persona: ") for s in corpus["valid"].src)


# ------------------------------------------------------------------- flags


def parse(argv):
    args = train_lib.build_parser().parse_args(argv)
    train_lib.validate_args(args, check_options=False)
    return args


def test_flags():
    args = parse(["--max_source_length=40", "--max_target_length=12"])
    assert (args.dataset, args.max_length, args.max_history) == (
        "builtin", 40, 3)
    assert args.model_dir.endswith("builtin-random_vanilla")
    args = parse(["--data_dir=pc", "--persona=none"])
    assert args.dataset == "files"
    for argv, message in [
            (["--dataset=files"], "--data_dir` is required"),
            (["--dataset=builtin", "--data_dir=pc"], "builtin reads"),
            (["--persona=other"], "self_original files only"),
            (["--max_target_length=2"], "at least 3")]:
        with pytest.raises(ValueError, match=message):
            parse(argv)
