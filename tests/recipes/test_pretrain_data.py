"""The pretraining recipe's pure-Python parts on every backend: corpus
readers (many files, globs, .gz, GLUE .tsv sentences), packing into full
windows with nothing dropped, the held-out split, and the flags."""

import gzip

import numpy as np
import pytest

from recipes.core.data_files import DataError
from recipes.pretrain import data as data_lib
from recipes.pretrain import train as train_lib


def test_pack_windows_keeps_every_token_once_in_order():
    rng = np.random.default_rng(0)
    docs = [rng.integers(5, 100, size=n).astype("int32")
            for n in rng.integers(1, 40, size=57)]
    windows, lengths = data_lib.pack_windows(docs, window=16, end_id=2)
    stream = np.concatenate([np.append(d, 2) for d in docs])
    assert windows.shape == (-(-len(stream) // 16), 16)
    # Every window is full but the last, which is padded with 0.
    assert (lengths[:-1] == 16).all() and 1 <= lengths[-1] <= 16
    assert lengths.sum() == len(stream)
    real = np.concatenate([w[:n] for w, n in zip(windows, lengths)])
    np.testing.assert_array_equal(real, stream)
    assert (windows[-1][lengths[-1]:] == 0).all()


def test_pack_windows_exact_multiple_has_no_padding():
    windows, lengths = data_lib.pack_windows([np.arange(5, 12)], 4, end_id=2)
    np.testing.assert_array_equal(windows, [[5, 6, 7, 8], [9, 10, 11, 2]])
    np.testing.assert_array_equal(lengths, [4, 4])


def test_hold_out_is_a_seeded_partition():
    windows = np.arange(100)[:, None] * np.ones((1, 3), "int32")
    lengths = np.full(100, 3)
    (train, _), (valid, _) = data_lib.hold_out(windows, lengths, 0.1, seed=3)
    assert len(valid) == 10 and len(train) == 90
    assert sorted(np.concatenate([train[:, 0], valid[:, 0]])) == list(
        range(100))
    (_, _), (again, _) = data_lib.hold_out(windows, lengths, 0.1, seed=3)
    np.testing.assert_array_equal(valid, again)
    (_, _), (other, _) = data_lib.hold_out(windows, lengths, 0.1, seed=4)
    assert not np.array_equal(valid, other)


def test_hold_out_refuses_to_leave_nothing_for_training():
    with pytest.raises(DataError, match="packs into 1 window"):
        data_lib.hold_out(np.zeros((1, 4), "int32"), np.array([4]), 0.05, 0)


def test_many_files_globs_gzip_and_tsv_read_as_one_corpus(tmp_path):
    (tmp_path / "a.txt").write_text("first line\n\nsecond line\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("third line\n")
    (tmp_path / "train.tsv").write_text(
        "sentence\tlabel\na fine film .\t1\na dull one .\t0\n")
    paths = data_lib.expand_patterns([str(tmp_path / "*.txt*"),
                                      str(tmp_path / "train.tsv")])
    assert [p.rsplit("/", 1)[1] for p in paths] == ["a.txt", "b.txt.gz",
                                                    "train.tsv"]
    assert data_lib.read_lines(paths) == [
        "first line", "second line", "third line", "a fine film .",
        "a dull one ."]


def test_bad_corpus_files_name_the_file(tmp_path):
    with pytest.raises(DataError, match="matches no file"):
        data_lib.expand_patterns([str(tmp_path / "*.txt")])
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\nhello\t1\n")
    with pytest.raises(DataError, match=r"no column 'sentence'.*--tsv_column"):
        data_lib.read_lines([str(bad)])
    assert data_lib.read_lines([str(bad)], tsv_column="text") == ["hello"]
    ragged = tmp_path / "ragged.tsv"
    ragged.write_text("sentence\tlabel\nhello\n")
    with pytest.raises(DataError, match="line 2: 1 fields, expected 2"):
        data_lib.read_lines([str(ragged)])


def test_builtin_corpus_ships_with_the_recipes():
    lines = data_lib.builtin_texts()
    assert len(lines) > 8000  # 2,400 GLUE sentences and 6,000 lines of plays
    assert all(line.strip() for line in lines)
    assert not any("\t" in line for line in lines)  # no labels


def _args(*argv):
    args = train_lib.build_parser().parse_args(list(argv))
    train_lib.validate_args(args, check_options=False)
    return args


def test_flags_are_checked_before_tensorflow():
    args = _args("--objective=mlm")
    assert args.dataset == "builtin"
    assert args.model_dir.endswith("mlm-builtin-random_vanilla")
    args = _args("--train_files", "a.txt", "b.txt.gz")
    assert args.dataset == "files"
    for argv, match in [
        (["--mask_selection_rate=1.5"], r"--mask_selection_rate.*\(0, 1\)"),
        (["--noise_density=0"], r"--noise_density"),
        (["--mean_noise_span_length=0.5"], r"at least 1"),
        (["--valid_fraction=0"], r"holds nothing out"),
        (["--dataset=files"], r"needs --train_files"),
        (["--dataset=c4/en", "--train_files=a.txt"], r"don't pass"),
        (["--sequence_length=4"], r"at least 8"),
        (["--hidden_dim=30", "--num_heads=4"], r"multiple of `--num_heads`"),
        (["--synthesizer=randm"], r"random"),
    ]:
        with pytest.raises(ValueError, match=match):
            _args(*argv)
