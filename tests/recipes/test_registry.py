"""The recipe registry (`recipes.registry`): every recipe folder declares
itself, and every list generated from or checked against the registry
(`python -m recipes`, `recipes/__init__.py`'s docstring, the README, the
import test, the smoke commands) names every recipe. Pure Python."""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

import recipes
from recipes import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = [r.name for r in registry.recipes()]


def test_every_recipe_folder_declares_itself():
    folders = sorted(p.name for p in (ROOT / "recipes").iterdir()
                     if (p / "__init__.py").exists())
    assert folders == registry.package_names()
    assert NAMES == [n for n in folders if n not in registry.NOT_RECIPES]
    assert {"glue", "translate", "lm", "pretrain", "lra"} <= set(NAMES)
    for recipe in registry.recipes():
        assert recipe.description and "\n" not in recipe.description


def test_a_folder_without_a_declaration_is_an_error(monkeypatch, tmp_path):
    package = tmp_path / "recipes_extra" / "newrecipe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""No RECIPE here."""\n')
    monkeypatch.setattr(recipes, "__path__",
                        [*recipes.__path__, str(tmp_path / "recipes_extra")])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "recipes.newrecipe",
                        importlib.import_module("recipes_extra.newrecipe"))
    with pytest.raises(ValueError, match=r"recipes/newrecipe/ declares no "
                       r"recipe: its __init__.py must define `RECIPE"):
        registry.recipes()


def test_a_declaration_is_checked():
    with pytest.raises(ValueError, match="must not set --model_dir"):
        registry.Recipe("x", "y", smoke={"a": ("--model_dir=z",)})
    with pytest.raises(ValueError, match="must be a tuple of `--flag=value`"):
        registry.Recipe("x", "y", smoke={"a": ["--epochs=1"]})
    with pytest.raises(ValueError, match="No recipe 'glu'. Expected one of"):
        registry.get("glu")


def test_python_m_recipes_lists_every_recipe():
    result = subprocess.run([sys.executable, "-m", "recipes"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^python -m recipes\.(\w+) ", result.stdout, re.M)
    assert listed == NAMES, result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_the_docs_name_every_recipe(name):
    recipe = registry.get(name)
    docstring = recipes.__doc__
    assert f"- `python -m recipes.{name}`: {recipe.description}" in (
        " ".join(docstring.split())), f"recipes/__init__.py misses {name}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = readme.split("\n## ", 1)[0]
    assert f"recipes.{name}`" in intro, f"README's intro misses {name}"
    assert (ROOT / "docs" / "recipes" / f"{name}.md").exists() or (
        f"docs/recipes/{name}.md" not in readme)


@pytest.mark.parametrize("key, recipe, argv", registry.smoke_commands(),
                         ids=[k for k, _, _ in registry.smoke_commands()])
def test_smoke_commands_parse(key, recipe, argv):
    parser = importlib.import_module(f"{recipe.module}.train").build_parser()
    args = parser.parse_args(argv + ["--model_dir=x"])
    assert args.epochs == 1 and args.hidden_dim == 16


def test_every_smoke_id_is_unique_and_every_trainer_has_one():
    keys = [k for k, _, _ in registry.smoke_commands()]
    assert len(keys) == len(set(keys))
    assert "lra-listops" in keys and "lra-text" in keys
    for recipe in registry.recipes():
        trains = (ROOT / "recipes" / recipe.name / "train.py").exists()
        assert bool(recipe.smoke) == trains, recipe.name
