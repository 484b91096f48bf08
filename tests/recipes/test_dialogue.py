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


# ---------------------------------------------- the Chit-Chat corpus's files


def _message(*texts):
    return [{"text": text, "sender": "s", "timestamp": "t"} for text in texts]


def _conversation(*messages):
    return {"messages": list(messages), "prompt": "p", "ratings": {}}


def test_chitchat_conversion_reads_back_as_personachat(tmp_path):
    import json

    from recipes.dialogue import chitchat

    corpus = {
        # 3 messages: one pair, the last unanswered; tabs and line
        # breaks inside an utterance become spaces.
        "a": _conversation(_message("hi", "how are\tyou ?"),
                           _message("fine\nthanks"), _message("good")),
        "b": _conversation(_message("one sender only")),  # no reply
        "c": _conversation(_message("x"), _message("  ")),  # empty message
    }
    for i in range(3):  # 4 messages: two pairs
        corpus[f"d{i}"] = _conversation(
            _message(f"q{i}"), _message(f"r{i}"), _message(f"s{i}"),
            _message(f"t{i}", "u"))
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(corpus), encoding="utf-8")
    out = tmp_path / "out"
    logged = []
    assert chitchat.main([f"--json={path}", f"--output_dir={out}",
                          "--valid_dialogues=1", "--test_dialogues=1"]) == 0
    summary = json.loads((out / "chitchat.json").read_text(encoding="utf-8"))
    assert summary["conversations"] == 6 and summary["dialogues"] == 4
    assert summary["conversations_not_written"] == 2
    assert summary["unanswered_last_messages"] == 1
    assert {k: v["dialogues"] for k, v in summary["splits"].items()} == {
        "train": 2, "valid": 1, "test": 1}
    assert (out / "train_none_original.txt").read_text(
        encoding="utf-8").splitlines()[:2] == [
        "1 hi how are you ?\tfine thanks", "1 q0\tr0"]
    train = data_lib.read_dialogues(str(out / "train_none_original.txt"))
    assert [d.turns for d in train] == [
        ["hi how are you ?", "fine thanks"], ["q0", "r0", "s0", "t0 u"]]
    files = data_lib.split_files(str(out), persona="none")
    examples = data_lib.load(files, max_history=2, persona=False)
    assert examples["test"].tgt == ["r2", "t2 u"]
    assert examples["test"].src[1] == "history: r2 | s2"
    # Too few dialogues for the splits asked: a clear error, nothing
    # written.
    with pytest.raises(ValueError, match="--valid_dialogues=3"):
        chitchat.convert(corpus, str(tmp_path / "none"), 3, 1,
                         log=logged.append)
    assert not (tmp_path / "none").exists()


def test_chitchat_bad_json_is_one_error_line(tmp_path, capsys):
    from recipes.dialogue import chitchat

    path = tmp_path / "other.json"
    path.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert chitchat.main([f"--json={path}",
                          f"--output_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{chitchat.PROG}: error: --json={path}: expected")
    assert "\n" not in err and not (tmp_path / "out").exists()
    assert chitchat.main([f"--json={tmp_path / 'missing.json'}",
                          f"--output_dir={tmp_path / 'out'}"]) == 2
    assert "No such file" in capsys.readouterr().err
