"""Every code block a user would copy from README.md and docs/**/*.md
(docs/recipes/ included) works as written, and every relative link of
those documents resolves.

- ```python blocks are executed as they are (each in a fresh namespace, in
  a temporary working directory). A line `print(...)  # text` promises
  `text` as a line of the output, and that is checked.
- A Python block that needs a run directory is preceded by the comment
  `<!-- readme-test: needs python -m recipes.X FLAGS -->`: the test runs
  that command once per session, shortened by `SHORT_RUNS` (later flags
  win), in a temporary directory with the recipe's default `--model_dir`,
  and executes the block there in a fresh Python process, as a user would
  (TensorFlow backend only: the blocks load the run's SavedModel, which
  the recipes export on TensorFlow).
  These runs' exports must also say what they need (`assets/README.md`,
  `results.json`'s `export_usage`).
- A Python block that runs on some Keras backends only is preceded by
  `<!-- readme-test: needs backend tensorflow or jax -->`: it is skipped
  on the others.
- A Python block that downloads (a keras-hub preset) is preceded by
  `<!-- readme-test: needs network -->`: it is compiled, not run, and the
  `keras_synth` and `keras_hub` names it uses must exist.
- Every `python -m recipes.X ...` command of a shell block is parsed by
  the recipe's own parser (a renamed or misspelled flag fails);
  `--help` must print the usage. Paths and `pip` extras named in shell
  blocks must exist.
- Every relative link `[text](target)` (images too) names an existing
  file or folder, and its `#anchor`, if any, a heading of the target
  document (GitHub's anchors: lowercased, punctuation dropped, spaces as
  hyphens).
"""

import ast
import contextlib
import dataclasses
import importlib
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import warnings

import keras
import pytest

from recipes import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
NEEDS = re.compile(r"<!--\s*readme-test:\s*needs\s+(.+?)\s*-->")
RECIPE_COMMAND = re.compile(r"python -m (recipes(?:\.\w+)+)((?:\s+\S+)*)")
NETWORK = "network"
BACKEND_ONLY = re.compile(r"^backend\s+(\w+(?:\s+or\s+\w+)*)$")


def needs_run(block):
    """Whether the block needs a recipe run directory (`needs python -m
    recipes.X ...`)."""
    return bool(block.needs) and block.needs.startswith("python -m ")
# Warnings the documented examples may raise: third-party noise that our
# code cannot fix. Each entry is `(category, message regex)`, commented.
ALLOWED_WARNINGS = [
    # Keras' weight saving converts TensorFlow variables with
    # `np.asarray(v, copy=False)`, which NumPy 2 deprecates for TF's
    # `__array__` (keras/src/saving/saving_lib.py; shown to users only
    # when they enable DeprecationWarnings).
    (DeprecationWarning, r"__array__ implementation doesn't accept a copy"),
]
PRINT_PROMISE = re.compile(r"^\s*print\(.*\)\s+#\s*(.+?)\s*$")

# Flags appended to a `needs` command so that the run takes seconds.
_SMALL = ["--epochs=1", "--max_train_examples=64", "--batch_size=32",
          "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
          "--vocab_size=200", "--max_length=32", "--no_tensorboard",
          "--verbose=0"]
SHORT_RUNS = {
    "recipes.glue": _SMALL,
    "recipes.translate": _SMALL + ["--beam_size=1", "--warmup_steps=1"],
    "recipes.summarize": [
        "--epochs=1", "--max_train_examples=64", "--batch_size=32",
        "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
        "--vocab_size=200", "--max_source_length=32",
        "--max_target_length=12", "--beam_size=1", "--warmup_steps=1",
        "--max_decode_examples=8", "--no_tensorboard", "--verbose=0"],
    "recipes.lm": ["--epochs=1", "--max_train_examples=200",
                   "--batch_size=32", "--hidden_dim=16", "--num_heads=2",
                   "--num_layers=1", "--sequence_length=32",
                   "--max_new_tokens=8", "--no_tensorboard", "--verbose=0"],
}
# The module whose `build_parser()` parses a recipe's command line.
# Every registered recipe (`recipes.registry`): its `train` module where it
# trains, else its package; and the other commands the documents show.
PARSERS = {
    **{recipe.module: f"{recipe.module}.train" if recipe.smoke
       else recipe.module for recipe in registry.recipes()},
    "recipes.glue.quantize": "recipes.glue.quantize",
    "recipes.lra.make_documents": "recipes.lra.make_documents",
    "recipes.dialogue.chitchat": "recipes.dialogue.chitchat",
    "recipes.glue.int8_profile": "recipes.glue.int8_profile",
}


@dataclasses.dataclass(frozen=True)
class Block:
    path: pathlib.Path
    line: int
    language: str
    code: str
    needs: str = None

    @property
    def name(self):
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def code_blocks(path):
    """The fenced blocks of a Markdown file, with their `needs` marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```") and len(fence) > 3:
            start, body = i, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            before = [t for t in lines[:start] if t.strip()][-1:]
            marker = NEEDS.search(before[0]) if before else None
            blocks.append(Block(path, start + 1, fence[3:].strip(),
                                "\n".join(body) + "\n",
                                marker.group(1) if marker else None))
        i += 1
    return blocks


BLOCKS = [b for path in DOCUMENTS for b in code_blocks(path)]
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL = [b for b in BLOCKS if b.language in ("bash", "sh", "shell")]


def shell_commands(block):
    """The block's commands: continuation lines joined, comments dropped,
    split at `&&`, `||`, `;` and `do`."""
    text = re.sub(r"\\\n\s*", " ", block.code)
    commands = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        commands += [c.strip() for c in re.split(r"&&|\|\||;|\bdo\b", line)
                     if c.strip()]
    return commands


RECIPE_COMMANDS = [
    (block, match.group(1), match.group(2).strip())
    for block in SHELL for command in shell_commands(block)
    for match in [RECIPE_COMMAND.search(command)] if match
]


def test_the_documents_have_blocks_of_each_kind():
    # Guards the parser above: an empty list would make every test vacuous.
    assert len(PYTHON) >= 5 and len(RECIPE_COMMANDS) >= 8
    # The subfolders of docs/ are read too (the recipe manuals).
    assert ROOT / "docs" / "recipes" / "glue.md" in DOCUMENTS
    assert {b.path for b in BLOCKS} >= {ROOT / "docs" / "recipes" / name
                                        for name in ("glue.md", "lm.md",
                                                     "translate.md")}
    assert {b.needs.split()[2] for b in PYTHON
            if needs_run(b)} == set(SHORT_RUNS)


def test_the_readme_is_the_front_door():
    # Issue #27: manuals and tables live in docs/. `.ci/check_wheel` runs
    # the first Python block after "## Usage"; `.ci/run` the test command.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 350
    usage = readme.split("\n## Usage\n", 1)[1]
    assert re.search(r"```python\n(.*?)```", usage, re.S)
    assert ("for b in tensorflow jax torch; do KERAS_BACKEND=$b python -m "
            "pytest -q -n auto --maxprocesses=4 tests || exit 1; done"
            ) in readme


def check_names_exist(block):
    """A block not run (it downloads): it compiles, and the names it
    imports from `keras_synth` and the `keras_hub.X.Y` it uses exist."""
    tree = ast.parse(compile(block.code, block.name, "exec",
                             ast.PyCF_ONLY_AST))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith(
                "keras_synth"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), (block.name, alias.name)
        if (isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "keras_hub"):
            package = getattr(importlib.import_module("keras_hub"),
                              node.value.attr)
            assert hasattr(package, node.attr), (
                block.name, f"keras_hub.{node.value.attr}.{node.attr}")


@pytest.fixture(scope="session")
def recipe_run(tmp_path_factory):
    """`needs` command -> a folder where its (shortened) run has been made,
    at the recipe's default `--model_dir`; each command runs once."""
    runs = {}

    def make(needs):
        if needs not in runs:
            argv = shlex.split(needs)
            assert argv[:2] == ["python", "-m"], needs
            module = argv[2]
            folder = tmp_path_factory.mktemp("readme-run")
            train = importlib.import_module(PARSERS[module])
            previous = os.getcwd()
            os.chdir(folder)
            try:
                code = train.main(argv[3:] + SHORT_RUNS[module])
            finally:
                os.chdir(previous)
            assert code == 0, f"{needs} (shortened) failed with {code}"
            runs[needs] = folder
        return runs[needs]

    return make


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_python_block_runs_as_written(block, tmp_path, monkeypatch,
                                      recipe_run):
    if block.needs == NETWORK:
        check_names_exist(block)
        return
    backends = BACKEND_ONLY.match(block.needs or "")
    if backends:
        allowed = backends.group(1).split(" or ")
        if keras.backend.backend() not in allowed:
            pytest.skip(f"runs on the {' and '.join(allowed)} backends")
    elif needs_run(block):
        if keras.backend.backend() != "tensorflow":
            pytest.skip("needs a recipe run directory and its SavedModel "
                        "(TensorFlow backend)")
        # In a fresh process, as a user runs it: this process has loaded
        # ops (e.g. tensorflow-text's) that the block must load itself.
        result = subprocess.run(
            [sys.executable, "-c", block.code], cwd=recipe_run(block.needs),
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        assert result.returncode == 0, f"{block.name}:\n{result.stderr}"
        assert result.stdout.strip(), f"{block.name} printed nothing"
        return
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), warnings.catch_warnings():
        # A user's copy of the block prints no warning: each is an error,
        # but for the third-party noise of `ALLOWED_WARNINGS`.
        warnings.simplefilter("error")
        for category, message in ALLOWED_WARNINGS:
            warnings.filterwarnings("ignore", message, category)
        exec(compile(block.code, block.name, "exec"),
             {"__name__": "__readme__"})
    printed = [line.strip() for line in output.getvalue().splitlines()]
    for line in block.code.splitlines():
        promise = PRINT_PROMISE.match(line)
        if promise:
            assert promise.group(1) in printed, (
                f"{block.name}: `{line.strip()}` promises "
                f"{promise.group(1)!r}; the block printed {printed}")


@pytest.mark.parametrize("block, module, arguments", RECIPE_COMMANDS,
                         ids=[f"{b.name}-{m}" for b, m, _ in RECIPE_COMMANDS])
def test_recipe_command_parses(block, module, arguments, capsys):
    parser = importlib.import_module(PARSERS[module]).build_parser()
    argv = shlex.split(arguments)
    try:
        parser.parse_args(argv)
    except SystemExit as exit:
        output = capsys.readouterr()
        if "--help" in argv and exit.code == 0:
            assert output.out.startswith(f"usage: python -m {module}")
            return
        pytest.fail(f"{block.name}: `python -m {module} {arguments}` does "
                    f"not parse: {output.err.strip()}")
    assert "--help" not in argv, "--help must exit"


def test_paths_and_extras_in_shell_blocks_exist():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject.split("[project.optional-dependencies]", 1)[1]
    section = section.split("\n[", 1)[0]
    extras = set(re.findall(r"^(\w+)\s*=", section, flags=re.MULTILINE))
    checked = 0
    for block in SHELL:
        for command in shell_commands(block):
            for extra in re.findall(r"\[(\w+)\]", command):
                assert extra in extras, f"{block.name}: no extra [{extra}]"
                checked += 1
            for word in shlex.split(command):
                if re.match(r"^(tests|examples|recipes|docs)/", word):
                    assert (ROOT / word).exists(), f"{block.name}: {word}"
                    checked += 1
    assert checked >= 5


@pytest.mark.parametrize("needs", sorted({b.needs for b in PYTHON
                                          if needs_run(b)}))
def test_the_exports_say_what_they_need(needs, recipe_run):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the recipes export a SavedModel on TensorFlow only")
    folder = recipe_run(needs)
    [results_path] = folder.glob("runs/*/*/results.json")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    usage = results["export_usage"]
    assert usage["python"].startswith(
        "import tensorflow as tf\nimport tensorflow_text")
    assert f"tf.saved_model.load({results['export']!r})" in usage["python"]
    readme = (results_path.parent / "export" / "assets" / "README.md"
              ).read_text(encoding="utf-8")
    assert "import tensorflow_text" in readme
    assert "tensorflow-text" in readme
    assert f"Signature `{usage['signature']}`" in readme
    for name in list(usage["inputs"]) + list(usage["outputs"]):
        assert f"`{name}`" in readme


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def unfenced(path):
    """The document without its fenced blocks."""
    return re.sub(r"^\s*```.*?^\s*```\s*$", "", path.read_text(
        encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)


def anchors(path):
    """GitHub's heading anchors of a Markdown file: lowercased, characters
    other than letters, digits, `_`, `-` and spaces dropped, spaces as
    hyphens, `-1`, `-2`, ... for repeated headings."""
    found, seen = set(), {}
    for line in unfenced(path).splitlines():
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
            text = text.lower().replace("`", "")
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path):
    # Brackets inside inline code are no links.
    text = re.sub(r"`[^`\n]*`", "", unfenced(path))
    return [target for target in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def test_anchors_and_links_are_read_as_github_does(tmp_path):
    (tmp_path / "a.md").write_text((
        "# Multi30k de→en\n## SST-2 with a small model\n"
        "### Several workers (`--strategy=multi_worker`)\n"
        "## Tiny Shakespeare, character level\n## Tests\n## Tests\n"
        "```bash\n# not a heading\n```\n"), encoding="utf-8")
    assert anchors(tmp_path / "a.md") == {
        "multi30k-deen", "sst-2-with-a-small-model",
        "several-workers---strategymulti_worker",
        "tiny-shakespeare-character-level", "tests", "tests-1"}
    (tmp_path / "b.md").write_text(
        "[x](a.md#tests) ![y](a.md) [z](https://example.com) `[no](link)`\n"
        "```\n[code](nowhere.md)\n```\n", encoding="utf-8")
    assert relative_links(tmp_path / "b.md") == ["a.md#tests", "a.md"]


@pytest.mark.parametrize("path", DOCUMENTS,
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(path):
    checked = 0
    for target in relative_links(path):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), (
            f"{path.relative_to(ROOT)}: link {target!r} names no file "
            f"({linked})")
        if anchor:
            assert linked.suffix == ".md", f"{path.name}: {target!r}"
            assert anchor in anchors(linked), (
                f"{path.relative_to(ROOT)}: link {target!r}: no heading "
                f"#{anchor} in {linked.relative_to(ROOT)}; it has "
                f"{sorted(anchors(linked))}")
        checked += 1
    if path.name == "README.md" or "recipes" in path.parts:
        assert checked, f"{path.relative_to(ROOT)} links nowhere"
