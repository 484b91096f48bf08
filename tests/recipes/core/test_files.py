"""recipes.core.files, and the atomic writes of recipes.core.run_directory on
a file system without atomic renames.

The names (`join`, `abspath`, ...) are pure Python and tested on every
backend. The rest runs on TensorFlow's in-memory file system (`ram://`),
which `tf.io.gfile` reaches like `gs://`: its renames are not atomic (a
folder's contents are left behind), as on an object store. It needs
TensorFlow installed, not the TensorFlow backend (no Keras is involved).
"""

import gzip
import os
import subprocess
import sys
import uuid

import pytest

from recipes.core import files
from recipes.core import run_directory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class Killed(Exception):
    """Stands for a kill in the middle of a write."""


@pytest.fixture
def ram():
    """A fresh folder on `ram://` (the file system is global to the
    process), deleted afterwards."""
    tf = pytest.importorskip("tensorflow")
    folder = f"ram://test-files-{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(folder)
    yield folder
    if tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)


# ------------------------------------------------------------------- names


@pytest.mark.parametrize("path, expected", [
    ("gs://bucket/run", "gs"), ("ram://x", "ram"), ("s3://b/k", "s3"),
    ("file:///tmp/x", "file"), ("runs/glue", None), ("/abs/x", None),
    ("a:b/c", None), ("./gs:/x", None)])
def test_scheme(path, expected):
    assert files.scheme(path) == expected
    assert files.is_local(path) == (expected is None)


def test_names_keep_the_scheme():
    assert files.join("gs://bucket/run", "backup", "x.h5") == (
        "gs://bucket/run/backup/x.h5")
    assert files.join("gs://bucket/run/", "args.json") == (
        "gs://bucket/run/args.json")
    assert files.split("gs://bucket/run/args.json") == (
        "gs://bucket/run", "args.json")
    assert files.dirname("ram://a/b") == "ram://a"
    assert files.basename("ram://a/b") == "b"
    # os.path.abspath makes a local folder named `gs:` of a bucket path.
    assert os.path.abspath("gs://bucket/run").endswith("/gs:/bucket/run")
    assert files.abspath("gs://bucket/run") == "gs://bucket/run"
    assert files.abspath("gs://bucket/run/") == "gs://bucket/run"
    assert files.abspath("gs://bucket//a/./b") == "gs://bucket/a/b"
    assert files.abspath("runs/x") == os.path.abspath("runs/x")
    assert files.join("runs", "x") == os.path.join("runs", "x")
    assert run_directory.temporary_path("gs://bucket/run/results.json") == (
        f"gs://bucket/run/.tmp-{os.getpid()}-results.json")


def test_local_paths_import_no_tensorflow(tmp_path):
    # In a fresh process: local file operations, the run directory and
    # its atomic writes never import TensorFlow (the recipes check their
    # arguments before importing it).
    code = (
        "import sys, os\n"
        "from recipes.core import files, run_directory\n"
        "root = sys.argv[1]\n"
        "run = run_directory.RunDirectory(root, {'a': 1})\n"
        "run.write_results({'x': 1})\n"
        "files.write_text(files.join(root, 't.txt'), 'hi')\n"
        "assert files.read_text(files.join(root, 't.txt')) == 'hi'\n"
        "assert sorted(files.listdir(root)) == "
        "['args.json', 'results.json', 't.txt']\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"]


def test_local_text_files_as_open(tmp_path):
    path = str(tmp_path / "a.tsv")
    with files.open(path, "w", encoding="utf-8", newline="") as f:
        f.write("x\r\ny\n")
    assert open(path, "rb").read() == b"x\r\ny\n"
    with files.open(path, encoding="utf-8") as f:
        assert f.read() == "x\ny\n"  # universal newlines, as open()
    with files.open(path, encoding="utf-8", newline="") as f:
        assert f.read() == "x\r\ny\n"


# ----------------------------------------------------------------- ram://


def test_files_on_ram(ram):
    folder = files.join(ram, "a", "b")
    files.makedirs(folder)
    files.makedirs(folder)  # exist_ok
    with pytest.raises(FileExistsError):
        files.makedirs(folder, exist_ok=False)
    assert files.isdir(folder) and not files.isfile(folder)
    path = files.join(folder, "t.txt")
    assert not files.exists(path) and not files.isfile(path)
    files.write_text(path, "héllo\n")
    assert files.isfile(path) and not files.isdir(path)
    assert files.getsize(path) == len("héllo\n".encode("utf-8"))
    assert files.read_text(path) == "héllo\n"
    assert files.read_bytes(path) == "héllo\n".encode("utf-8")
    with files.open(path, "a", encoding="utf-8") as f:
        f.write("more\n")
    with files.open(path, encoding="utf-8") as f:
        assert list(f) == ["héllo\n", "more\n"]
    # Text modes read like open(): a byte-order mark, newline="".
    files.write_bytes(path, b"\xef\xbb\xbfa\tb\r\nc\td\r\n")
    with files.open(path, encoding="utf-8-sig", newline="") as f:
        assert f.read() == "a\tb\r\nc\td\r\n"
    with files.open(path, encoding="utf-8-sig") as f:
        assert f.read() == "a\tb\nc\td\n"
    with pytest.raises(ValueError, match=r"`mode`.*Received: mode='x'"):
        files.open(path, "x")
    files.write_bytes(files.join(folder, "u.bin"), b"\x00\x01")
    assert sorted(files.listdir(folder)) == ["t.txt", "u.bin"]
    assert files.glob(files.join(folder, "*.txt")) == [path]
    files.remove(path)
    assert files.listdir(folder) == ["u.bin"]


def test_read_gzip_from_ram(ram):
    path = files.join(ram, "train.txt.gz")
    files.write_bytes(path, gzip.compress("première ligne\n".encode()))
    assert files.read_gzip(path) == "première ligne\n".encode()
    files.write_bytes(path, b"not gzip at all")
    with pytest.raises(OSError):
        files.read_gzip(path)
    files.write_bytes(path, gzip.compress(b"x" * 1000)[:20])  # cut short
    with pytest.raises(EOFError):
        files.read_gzip(path)


def test_replace_copytree_rmtree_on_ram(ram, tmp_path):
    a, b = files.join(ram, "a.txt"), files.join(ram, "b.txt")
    files.write_text(a, "new")
    files.write_text(b, "old")
    files.replace(a, b)
    assert files.read_text(b) == "new" and not files.exists(a)
    files.write_text(a, "a longer text")
    files.copy(b, a)  # replaces (ram:// alone would append)
    assert files.read_text(a) == "new"

    # A folder tree from the local disk to ram:// and back.
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "x").write_text("1")
    (tmp_path / "src" / "sub" / "y").write_bytes(b"\x002")
    tree = files.join(ram, "tree")
    files.copytree(str(tmp_path / "src"), tree)
    assert sorted(files.listdir(tree)) == ["sub", "x"]
    assert files.read_bytes(files.join(tree, "sub", "y")) == b"\x002"
    files.copytree(tree, str(tmp_path / "back"))
    assert (tmp_path / "back" / "sub" / "y").read_bytes() == b"\x002"
    files.rmtree(tree)
    assert not files.exists(tree) and not files.exists(
        files.join(tree, "sub", "y"))
    files.rmtree(tree, ignore_errors=True)  # gone: nothing to do
    with pytest.raises(Exception):
        files.rmtree(tree)


def test_write_locally(ram, tmp_path):
    seen = []

    def write(folder):
        seen.append(folder)
        assert files.is_local(folder)
        os.makedirs(os.path.join(folder, "assets"))
        with open(os.path.join(folder, "assets", "v.txt"), "w") as f:
            f.write("v")
        return "done"

    target = files.join(ram, "preset")
    assert files.write_locally(target, write) == "done"
    assert files.read_text(files.join(target, "assets", "v.txt")) == "v"
    assert not os.path.exists(seen[0])  # the local copy is removed
    local = str(tmp_path / "preset")
    files.write_locally(local, write)
    assert seen[-1] == local


def test_check_filesystem_names_the_flag(ram):
    assert files.check_filesystem(ram, "model_dir") == ram
    assert files.check_filesystem("runs/x", "model_dir") == "runs/x"
    with pytest.raises(ValueError, match=(
            r"Argument `--model_dir`: the file system nosuch:// of "
            r"'nosuch://b/run' is not known to tf.io.gfile; expected a local "
            r"path or one of .*gs://.*ram://.*Received: "
            r"--model_dir=nosuch://b/run")):
        files.check_filesystem("nosuch://b/run", "model_dir")
    with pytest.raises(ValueError, match="model_dir"):
        run_directory.RunDirectory("nosuch://b/run", {"a": 1})


# ------------------------------------------- atomic writes without rename


def test_atomic_write_of_a_file_on_ram(ram):
    path = files.join(ram, "state.json")
    run_directory.write_json(path, {"epoch": 1})
    assert run_directory.read_json(path) == {"epoch": 1}

    def half_written(tmp):
        files.write_text(tmp, '{"epo')
        raise Killed()

    with pytest.raises(Killed):
        run_directory.atomic_write(path, half_written)
    assert run_directory.read_json(path) == {"epoch": 1}
    assert files.listdir(ram) == ["state.json"]  # no temporary left
    run_directory.write_json(path, {"epoch": 2})
    assert run_directory.read_json(path) == {"epoch": 2}
    assert files.listdir(ram) == ["state.json"]


def _write_folder(content, fail=False):
    def write(tmp):
        files.makedirs(files.join(tmp, "variables"))
        files.write_text(files.join(tmp, content), content)
        if fail:
            raise Killed()
    return write


def test_atomic_write_of_a_folder_on_ram_replaces_it_whole(ram):
    path = files.join(ram, "export")
    assert run_directory.atomic_write(path, _write_folder("one")) == path
    assert sorted(files.listdir(path)) == ["one", "variables"]
    with pytest.raises(Killed):
        run_directory.atomic_write(path, _write_folder("two", fail=True))
    assert sorted(files.listdir(path)) == ["one", "variables"]
    assert files.listdir(ram) == ["export"]
    run_directory.atomic_write(path, _write_folder("three"))
    # The previous folder's files are gone, not merged.
    assert sorted(files.listdir(path)) == ["three", "variables"]
    assert files.read_text(files.join(path, "three")) == "three"
    assert files.listdir(ram) == ["export"]


def test_a_kill_while_copying_a_complete_folder_is_finished_at_restart(ram):
    run_dir = run_directory.RunDirectory(ram, {"a": 1})
    export = run_dir.path("export")
    run_directory.atomic_write(export, _write_folder("one"))
    # What a process (pid 99) killed while copying its complete new folder
    # leaves: the new folder, its sentinel, a half-copied destination.
    new = run_dir.path(".tmp-99-export")
    _write_folder("two")(new)
    files.write_text(run_dir.path(".tmp-done-99-export"), "")
    files.rmtree(export)
    files.makedirs(export)
    files.write_text(files.join(export, "two"), "tw")  # cut short
    # ... and one killed before its folder was complete (no sentinel).
    _write_folder("three")(run_dir.path(".tmp-98-backup"))
    run_directory.atomic_write(run_dir.path("backup"), _write_folder("kept"))

    run_directory.RunDirectory(ram, {"a": 1})  # the restart
    assert sorted(files.listdir(ram)) == ["args.json", "backup", "export"]
    assert sorted(files.listdir(export)) == ["two", "variables"]
    assert files.read_text(files.join(export, "two")) == "two"
    assert sorted(files.listdir(run_dir.path("backup"))) == [
        "kept", "variables"]


# A SIGKILL would end the process and ram:// with it: the interruptions are
# exceptions raised by the file operations instead. One raised after the
# sentinel leaves what a kill leaves (the copy is outside the clean-up);
# one raised before it is cleaned up (a kill there leaves a folder without
# a sentinel: see the test above).
@pytest.mark.parametrize("failing, recovered", [
    ("the writer", "one"),
    ("writing the sentinel", "one"),
    ("copying", "two"),
    ("removing the sentinel", "two"),
])
def test_interrupted_folder_replacement_on_ram_recovers(
        ram, monkeypatch, failing, recovered):
    run_dir = run_directory.RunDirectory(ram, {"a": 1})
    export = run_dir.path("export")
    run_directory.atomic_write(export, _write_folder("one"))

    def sentinel(path):
        return files.basename(path).startswith(".tmp-done-")

    def fail_if(point, original, condition):
        def wrapper(path, *args):
            if failing == point and condition(path):
                raise Killed()
            return original(path, *args)
        return wrapper

    monkeypatch.setattr(files, "write_text", fail_if(
        "writing the sentinel", files.write_text, sentinel))
    monkeypatch.setattr(files, "copy", fail_if(
        "copying", files.copy, lambda path: True))
    monkeypatch.setattr(files, "remove", fail_if(
        "removing the sentinel", files.remove, sentinel))
    with pytest.raises(Killed):
        run_directory.atomic_write(
            export, _write_folder("two", fail=failing == "the writer"))
    monkeypatch.undo()
    left = files.listdir(ram)
    assert (".tmp-done-%d-export" % os.getpid() in left) == (
        recovered == "two"), left

    run_directory.RunDirectory(ram, {"a": 1})  # the restart
    assert sorted(files.listdir(ram)) == ["args.json", "export"]
    assert sorted(files.listdir(export)) == [recovered, "variables"]
    assert files.read_text(files.join(export, recovered)) == recovered
