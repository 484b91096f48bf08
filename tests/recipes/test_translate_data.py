"""recipes.translate: file readers and argument checks (pure Python, every
backend)."""

import gzip
import os

import pytest

from recipes.core import parallel_data
from recipes.core.data_files import DataError
from recipes.translate import data as data_lib
from recipes.translate import train as train_lib


def write(path, lines, compress=False, newline="\n"):
    payload = "".join(line + newline for line in lines).encode("utf-8")
    if compress:
        payload = gzip.compress(payload)
    path.write_bytes(payload)
    return str(path)


def parse(argv):
    return train_lib.build_parser().parse_args(argv)


# ----------------------------------------------------------------- readers


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_read_lines_plain_and_gzipped(tmp_path, compress, newline):
    lines = ["Ein Hund läuft.", "", "Zwei  Männer  "]
    path = write(tmp_path / "x.de", lines, compress, newline)
    assert parallel_data.read_lines(path) == lines


def test_gzip_is_recognised_by_content_not_name(tmp_path):
    path = tmp_path / "no_suffix"
    path.write_bytes(gzip.compress("a\nb\n".encode()))
    assert parallel_data.read_lines(str(path)) == ["a", "b"]
    # ... and a file named .gz that isn't compressed is read as text.
    path = write(tmp_path / "plain.gz", ["c"])
    assert parallel_data.read_lines(path) == ["c"]


def test_read_lines_errors(tmp_path):
    with pytest.raises(DataError, match=r"no such file"):
        parallel_data.read_lines(str(tmp_path / "missing.de"))
    (tmp_path / "empty.de").write_text("")
    with pytest.raises(DataError, match=r"is empty"):
        parallel_data.read_lines(str(tmp_path / "empty.de"))
    (tmp_path / "empty.gz").write_bytes(gzip.compress(b""))
    with pytest.raises(DataError, match=r"empty \(no lines\)"):
        parallel_data.read_lines(str(tmp_path / "empty.gz"))
    (tmp_path / "latin1.de").write_bytes("Straße\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"not UTF-8"):
        parallel_data.read_lines(str(tmp_path / "latin1.de"))


def test_read_parallel_checks_line_counts(tmp_path):
    src = write(tmp_path / "train.de.gz", ["a", "b", "c"], compress=True)
    tgt = write(tmp_path / "train.en", ["x", "y", "z"])
    pairs = data_lib.read_parallel(src, tgt)
    assert (pairs.src, pairs.tgt, len(pairs)) == (
        ["a", "b", "c"], ["x", "y", "z"], 3)
    assert pairs.head(2).src == ["a", "b"] and pairs.head(None) is pairs
    short = write(tmp_path / "short.en", ["x", "y"])
    with pytest.raises(DataError) as info:
        data_lib.read_parallel(src, short, "valid")
    message = str(info.value)
    assert "valid files have different line counts" in message
    assert f"{src} has 3 lines" in message and f"{short} has 2" in message


def test_load_files(tmp_path):
    train = (write(tmp_path / "t.de", ["a", "b"]),
             write(tmp_path / "t.en", ["x", "y"]))
    valid = (write(tmp_path / "v.de", ["c"]), write(tmp_path / "v.en", ["z"]))
    corpus = data_lib.load_files({"train": train, "valid": valid})
    assert sorted(corpus) == ["train", "valid"]
    assert corpus["valid"].tgt == ["z"]
    with pytest.raises(ValueError, match=r"--valid_src` needs `--valid_tgt"):
        data_lib.load_files({"train": train, "valid": (valid[0], None)})
    with pytest.raises(ValueError, match=r"--train_src` and `--train_tgt"):
        data_lib.load_files({"valid": valid})


def test_builtin_files_are_parallel_and_shipped():
    files = data_lib.builtin_files("de", "en")
    assert sorted(files) == ["test", "train", "valid"]
    corpus = data_lib.load_files(files)
    assert [len(corpus[s]) for s in ("train", "valid", "test")] == [
        4000, 200, 200]
    assert files["train"][0].endswith("train.de.gz")
    # The splits don't overlap and the direction can be reversed.
    train = set(zip(corpus["train"].src, corpus["train"].tgt))
    assert not train & set(zip(corpus["test"].src, corpus["test"].tgt))
    reverse = data_lib.load_files(data_lib.builtin_files("en", "de"))
    assert reverse["test"].src == corpus["test"].tgt
    with pytest.raises(ValueError, match=r"built-in task is German-English"
                       r".*--tgt=fr"):
        data_lib.builtin_files("de", "fr")


# --------------------------------------------------------------- arguments


@pytest.mark.parametrize("flag, value", [
    ("src", "German"), ("src", "d"), ("tgt", "EN"), ("tgt", "e1")])
def test_unknown_languages(flag, value):
    languages = {"src": "de", "tgt": "en", flag: value}
    args = parse([f"--src={languages['src']}", f"--tgt={languages['tgt']}"])
    with pytest.raises(ValueError, match=rf"--{flag}={value!r}"):
        train_lib.validate_args(args)


def test_same_language_twice():
    with pytest.raises(ValueError, match=r"must differ.*--src=de --tgt=de"):
        train_lib.validate_args(parse(["--src=de", "--tgt=de"]))


@pytest.mark.parametrize("flag", ["synthesizer",
                                  "cross_attention_synthesizer"])
def test_unknown_variants(flag):
    args = parse(["--src=de", "--tgt=en", f"--{flag}=randomish"])
    with pytest.raises(ValueError, match=rf"--{flag}`.*randomish"):
        train_lib.validate_args(args)


@pytest.mark.parametrize("argv, message", [
    (["--max_length=2"], r"--max_length` must be at least 3"),
    (["--hidden_dim=30", "--num_heads=4"], r"multiple of `--num_heads`"),
    (["--dropout=1.0"], r"--dropout` must be in \[0, 1\)"),
    (["--tgt_vocab_file=v.txt"], r"needs `--vocab=separate`"),
    (["--valid_src=v.de", "--valid_tgt=v.en"], r"--train_src` and "),
    (["--dataset=builtin", "--train_src=a", "--train_tgt=b"],
     r"don't pass --train_src"),
])
def test_bad_arguments(argv, message):
    with pytest.raises(ValueError, match=message):
        train_lib.validate_args(parse(["--src=de", "--tgt=en"] + argv))


@pytest.mark.parametrize("flag", ["beam_size", "decode_batch_size",
                                  "warmup_steps", "max_length"])
def test_sizes_are_checked_by_the_parser(flag, capsys):
    with pytest.raises(SystemExit):
        parse(["--src=de", "--tgt=en", f"--{flag}=0"])
    assert (f"error: Argument `--{flag}` must be positive. Received: "
            f"--{flag}=0") in capsys.readouterr().err


def test_arguments_are_canonicalised(tmp_path):
    args = parse(["--src=de", "--tgt=en", "--synthesizer=vanilla+random",
                  "--train_src=a.de", "--train_tgt=a.en"])
    train_lib.validate_args(args)
    assert args.synthesizer == "vanilla+random"
    assert args.dataset == "files"
    assert args.model_dir == os.path.join(
        "runs", "translate", "files-de-en-vanilla_random")


def _main_with_bad_files(tmp_path, capsys):
    src = write(tmp_path / "t.de", ["a", "b", "c"])
    tgt = write(tmp_path / "t.en", ["x"])
    code = train_lib.main(["--src=de", "--tgt=en", f"--train_src={src}",
                           f"--train_tgt={tgt}",
                           f"--model_dir={tmp_path / 'run'}"])
    return code, capsys.readouterr().err


def test_main_reports_bad_files_in_one_line(tmp_path, capsys):
    code, err = _main_with_bad_files(tmp_path, capsys)
    assert code == 2
    assert "error: The train files have different line counts" in err
    assert "Traceback" not in err
