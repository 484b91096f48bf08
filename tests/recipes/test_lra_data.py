"""recipes.lra's data: the seeded ListOps generator checked by an evaluator
of its own (a stack over the tokens, not the generator's trees), LRA's TSV
files, the byte-level text sets and the cut counts (pure Python and NumPy:
every Keras backend)."""

import gzip
import os

import numpy as np
import pytest

from recipes.core.data_files import DataError
from recipes.lra import listops
from recipes.lra import sequences
from recipes.lra import text as text_lib

SMALL = {"train_size": 60, "val_size": 10, "test_size": 10,
         "min_length": 30, "max_length": 300, "max_depth": 6,
         "max_args": 5}


def evaluate(tokens):
    """The value of a token sequence with a stack (the test's own reading
    of ListOps: MIN, MAX, MED rounded down, sum mod 10), its deepest
    operator nesting and the argument counts of its operators."""
    stack, depth, counts = [[]], 0, []
    for token in tokens:
        if token.startswith("["):
            stack.append([token])
            depth = max(depth, len(stack) - 1)
        elif token == "]":
            operator, *values = stack.pop()
            counts.append(len(values))
            ordered = sorted(values)
            if operator == "[MIN":
                result = ordered[0]
            elif operator == "[MAX":
                result = ordered[-1]
            elif operator == "[SM":
                result = sum(values) % 10
            else:
                assert operator == "[MED", operator
                n = len(ordered)
                result = (ordered[n // 2] if n % 2 else
                          int(np.floor((ordered[n // 2 - 1]
                                        + ordered[n // 2]) / 2)))
            stack[-1].append(result)
        else:
            stack[-1].append(int(token))
    assert len(stack) == 1 and len(stack[0]) == 1, tokens[:20]
    return stack[0][0], depth, counts


@pytest.fixture(scope="module")
def generated():
    return listops.generate(3, **SMALL)


def test_every_tree_evaluates_to_its_label(generated):
    for split in listops.SPLITS:
        for source, label in generated[split]:
            value, _, _ = evaluate(listops.tokens(source))
            assert value == label, source


@pytest.mark.parametrize("tokens,expected", [
    ("[MED 3 6 ]", 4), ("[MED 1 2 ]", 1), ("[MED 9 0 4 ]", 4),
    ("[SM 9 8 7 ]", 4), ("[MAX 2 [MIN 4 7 ] 0 ]", 4),
])
def test_known_values(tokens, expected):
    assert evaluate(tokens.split())[0] == expected
    tree = _parse(tokens.split())
    assert listops.value(tree) == expected
    # LRA's nested-parentheses writing reads back as the same tokens.
    assert listops.tokens(listops.to_source(tree)) == tokens.split()


def _parse(tokens):
    stack = [[]]
    for token in tokens:
        if token.startswith("["):
            stack.append([token])
        elif token == "]":
            operator, *arguments = stack.pop()
            stack[-1].append((operator, arguments))
        else:
            stack[-1].append(int(token))
    return stack[0][0]


def test_lengths_depths_and_arguments_within_bounds(generated):
    for split, size in (("train", 60), ("val", 10), ("test", 10)):
        assert len(generated[split]) == size
    sources = [s for split in listops.SPLITS for s, _ in generated[split]]
    assert len(set(sources)) == len(sources)  # no repeats across splits
    for source in sources:
        tokens = listops.tokens(source)
        assert SMALL["min_length"] < len(tokens) < SMALL["max_length"]
        _, depth, counts = evaluate(tokens)
        # The root is at depth 1 and digits at most at max_depth: operators
        # nest at most max_depth - 1 deep.
        assert 1 <= depth <= SMALL["max_depth"] - 1
        assert all(2 <= c <= SMALL["max_args"] for c in counts)


def test_default_parameters_are_lras():
    assert listops.DEFAULTS == {
        "train_size": 96000, "val_size": 2000, "test_size": 2000,
        "min_length": 500, "max_length": 2000, "max_depth": 10,
        "max_args": 10}
    rows = listops.generate(0, train_size=3, val_size=1, test_size=1)
    for source, label in rows["train"]:
        tokens = listops.tokens(source)
        assert 500 < len(tokens) < 2000
        value, depth, _ = evaluate(tokens)
        assert value == label and depth <= 9


def test_same_seed_same_data_other_seed_other_data(generated):
    assert listops.generate(3, **SMALL) == generated
    assert listops.generate(4, **SMALL) != generated


def test_labels_use_every_digit():
    rows = listops.generate(1, **dict(SMALL, train_size=400))
    assert {label for _, label in rows["train"]} == set(range(10))


def test_bad_parameters_name_the_flag():
    with pytest.raises(ValueError, match="--listops_max_args"):
        listops.generate(0, **dict(SMALL, max_args=1))
    with pytest.raises(ValueError, match="--listops_min_length"):
        listops.generate(0, **dict(SMALL, min_length=300))
    with pytest.raises(ValueError, match="longest has 4 tokens"):
        listops.generate(0, **dict(SMALL, max_depth=2, max_args=2,
                                   min_length=5))
    with pytest.raises(ValueError, match="after 50 draws"):
        listops.generate(0, **SMALL, max_tries=50)


def test_tsv_round_trip_and_lra_header(tmp_path, generated):
    path = str(tmp_path / "basic_train.tsv")
    listops.write_tsv(path, generated["train"])
    with open(path) as f:
        assert f.readline() == "Source\tTarget\n"
    assert listops.read_tsv(path) == generated["train"]
    gz = str(tmp_path / "basic_val.tsv.gz")
    with gzip.open(gz, "wt") as f:
        f.write("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n")
    assert listops.read_tsv(gz) == [("( ( ( [MAX 2 ) 9 ) ] )", 9)]


def test_lra_release_files_read(tmp_path):
    # Rows as LRA's release writes them (its generator's parentheses).
    (tmp_path / "basic_train.tsv").write_text(
        "Source\tTarget\n( ( ( ( [SM 9 ) 8 ) 7 ) ] )\t4\n")
    (tmp_path / "basic_val.tsv").write_text(
        "Source\tTarget\n( ( ( [MIN 4 ) 7 ) ] )\t4\n")
    with gzip.open(tmp_path / "basic_test.tsv.gz", "wt") as f:
        f.write("Source\tTarget\n( ( ( [MED 3 ) 6 ) ] )\t4\n")
    splits = listops.read_splits(str(tmp_path))
    assert [len(splits[s]) for s in listops.SPLITS] == [1, 1, 1]
    ids = listops.encode(splits["train"][0][0])
    assert [listops.VOCABULARY[i] for i in ids] == [
        "[CLS]", "[SM", "9", "8", "7", "]"]


@pytest.mark.parametrize("content,match", [
    ("Input\tTarget\n1\t1\n", "expected LRA's header"),
    ("Source\tTarget\n[MAX 1 2 ]\t12\n", "line 2"),
    ("Source\tTarget\n[MAX 1 2 ]\n", "line 2"),
])
def test_bad_tsv_files(tmp_path, content, match):
    path = tmp_path / "basic_train.tsv"
    path.write_text(content)
    with pytest.raises(DataError, match=match) as info:
        listops.read_tsv(str(path))
    assert str(path) in str(info.value)


def test_unknown_token_is_an_error():
    with pytest.raises(DataError, match=r"'\[FIRST'"):
        listops.encode("[FIRST 1 2 ]", "line 7")


def test_cache_written_once(tmp_path):
    cache = str(tmp_path / "cache")
    first, folder = listops.cached_splits(cache, 5, SMALL, log=lambda _: 0)
    names = sorted(os.listdir(folder))
    assert names == ["basic_test.tsv", "basic_train.tsv", "basic_val.tsv",
                     "generator.json"]
    stamps = {n: os.stat(os.path.join(folder, n)).st_mtime_ns for n in names}
    lines = []
    again, same = listops.cached_splits(cache, 5, SMALL, log=lines.append)
    assert same == folder and again == first
    assert "cached in" in lines[0]
    assert stamps == {n: os.stat(os.path.join(folder, n)).st_mtime_ns
                      for n in names}
    other, elsewhere = listops.cached_splits(cache, 6, SMALL,
                                             log=lambda _: 0)
    assert elsewhere != folder and other != first


# ------------------------------------------------------------------ text


def test_byte_ids_and_cut_counts():
    rows = sequences.byte_sequences(["é!", "abcdefghij"])
    # [CLS], UTF-8 bytes + 4, [SEP].
    assert rows[0] == [1, 0xC3 + 4, 0xA9 + 4, ord("!") + 4, 2]
    packed = sequences.pack(rows, 8, keep_last=True)
    assert packed.cut == 1 and packed.longest == 12
    np.testing.assert_array_equal(packed.token_ids[0],
                                  [1, 199, 173, 37, 2, 0, 0, 0])
    # A cut document keeps [SEP] last (as the exported preprocessor packs).
    np.testing.assert_array_equal(
        packed.token_ids[1], [1] + [ord(c) + 4 for c in "abcdef"] + [2])
    assert list(packed.lengths) == [5, 8]
    assert packed.summary()["cut"] == 1
    listops_rows = sequences.pack([[1, 5, 6, 7]], 3)
    assert listops_rows.cut == 1 and list(listops_rows.token_ids[0]) == [
        1, 5, 6]
    line = sequences.cut_line("Text", "train", packed, 8)
    assert "1 of 2 examples longer than --max_length=8" in line


def test_exactly_max_length_is_not_cut():
    packed = sequences.pack([[1, 5, 2]], 3, keep_last=True)
    assert packed.cut == 0
    assert "none longer" in sequences.cut_line("Text", "test", packed, 3)


def test_labelled_files_plain_and_gz(tmp_path):
    plain = tmp_path / "train.tsv"
    plain.write_text("pos\ta fine film\twith a tab\n\nneg\tdull\n")
    packed = tmp_path / "test.tsv.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write("neg\tennuyeux à mourir\n")
    train = text_lib.read_labelled_file(str(plain))
    assert train == [("pos", "a fine film\twith a tab"), ("neg", "dull")]
    test = text_lib.read_labelled_file(str(packed))
    assert test == [("neg", "ennuyeux à mourir")]
    classes = text_lib.class_names(train)
    assert classes == ["neg", "pos"]
    assert text_lib.label_ids(test, classes, "test") == [0]
    with pytest.raises(DataError, match=r"labels the training split lacks"):
        text_lib.label_ids([("meh", "x")], classes, "test")
    assert text_lib.class_names([("10", "a"), ("9", "b")]) == ["9", "10"]


def test_bad_labelled_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("1\tgood\nno tab here\n")
    with pytest.raises(DataError, match="line 2"):
        text_lib.read_labelled_file(str(path))


def test_builtin_set_is_seeded_and_long():
    first = text_lib.builtin_splits(0)
    assert first == text_lib.builtin_splits(0)
    assert first != text_lib.builtin_splits(1)
    assert {k: len(v) for k, v in first.items()} == text_lib.BUILTIN_SIZES
    lengths = [len(body.encode("utf-8")) for _, body in first["train"]]
    assert min(lengths) > 100 and max(lengths) > 1500
    assert {label for label, _ in first["train"]} == {"0", "1"}


def test_imdb_reviews_under_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=5):
        splits = text_lib.tfds_splits("imdb_reviews")
        few = text_lib.tfds_splits("imdb_reviews", max_examples=2)
    assert len(splits["train"]) == 5 and len(splits["test"]) == 5
    assert len(few["train"]) == 2
    assert all(label in ("0", "1") for label, _ in splits["train"])
    assert all(isinstance(body, str) for _, body in splits["test"])


@pytest.mark.parametrize("name,features,classes", [
    ("ag_news_subset", ("title", "description"), {"0", "1", "2", "3"}),
    ("yelp_polarity_reviews", ("text",), {"0", "1"}),
])
def test_news_and_reviews_under_mock_data(name, features, classes):
    """The text is the set's text features joined by a space, the label its
    integer label (mock_data draws the same examples again under the same
    seed: the test reads them directly to compare)."""
    tfds = pytest.importorskip("tensorflow_datasets")
    assert text_lib.TFDS_SETS[name][0] == features
    with tfds.testing.mock_data(num_examples=4):
        splits = text_lib.tfds_splits(name)
        raw = {split: list(tfds.as_numpy(tfds.load(name, split=split)))
               for split in ("train", "test")}
    for split in ("train", "test"):
        expected = [(str(int(e["label"])),
                     " ".join(e[f].decode("utf-8") for f in features))
                    for e in raw[split]]
        assert splits[split] == expected, split
    assert {label for label, _ in splits["train"]} <= classes
    info_classes = tfds.builder(name).info.features["label"].num_classes
    assert info_classes == len(classes)


def test_unknown_tfds_set_and_failed_load_are_named(monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    with pytest.raises(ValueError, match="name='mnist'"):
        text_lib.tfds_splits("mnist")

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(DataError, match="'ag_news_subset' split 'train' "
                       r"\(ConnectionError: no network\)"):
        text_lib.tfds_splits("ag_news_subset")


def test_documents_join_one_label_in_order_and_count_the_rest(tmp_path):
    from recipes.lra import make_documents

    rows = [("0", "aaaa"), ("1", "bb"), ("0", "cc"), ("1", "dddd"),
            ("0", "e"), ("1", "f")]
    docs, left = make_documents.documents(rows, min_bytes=6)
    assert docs == [("0", "aaaa cc"), ("1", "bb dddd")]
    assert left == {"0": ["e"], "1": ["f"]}
    with pytest.raises(ValueError, match="min_bytes=0"):
        make_documents.documents(rows, 0)
    glue = tmp_path / "SST-2"
    glue.mkdir()
    for name, body in (("train.tsv", rows), ("dev.tsv", rows[:3])):
        (glue / name).write_text("sentence\tlabel\n" + "".join(
            f"{s}\t{label}\n" for label, s in body), encoding="utf-8")
    out = tmp_path / "docs"
    lines = []
    summary = make_documents.make_documents(str(glue), str(out), 6,
                                            log=lines.append)
    assert text_lib.read_labelled_file(str(out / "train.tsv")) == docs
    assert text_lib.read_labelled_file(str(out / "test.tsv")) == [
        ("0", "aaaa cc")]
    assert summary["splits"]["train"]["sentences_left_over"] == 2
    assert summary["splits"]["test"]["sentences_left_over"] == 1
    assert "2 sentences (2 bytes) left over" in lines[0]


def test_make_documents_flag_is_checked_by_its_type(capsys):
    from recipes.lra import make_documents

    with pytest.raises(SystemExit):
        make_documents.build_parser().parse_args(
            ["--glue_dir=x", "--output_dir=y", "--min_bytes=0"])
    assert ("Argument `--min_bytes` must be positive. Received: "
            "--min_bytes=0") in capsys.readouterr().err
