"""Importing a recipe module leaves the Keras backend alone: only the entry
points (`main`, `python -m recipes.X`) select TensorFlow."""

import json
import os
import pathlib
import subprocess
import sys

from recipes import registry
from tests.recipes.core.tensorflow_only import once

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What a user imports to reuse a recipe's parts without training; none of
# them may import Keras (which would fix its backend) or TensorFlow.
LIGHT = [
    "recipes", "recipes.__main__", "recipes.cli", "recipes.registry",
    "recipes.serving",
    "recipes.core.callbacks",
    "recipes.core.cluster", "recipes.core.compute",
    "recipes.core.data_files", "recipes.core.devices",
    "recipes.core.flags", "recipes.core.runtime", "recipes.core.workers",
    "recipes.core.run_directory", "recipes.core.storage",
    "recipes.core.training",
    "recipes.core.vocabulary",
    "recipes.glue.tasks", "recipes.glue.tsv", "recipes.glue.jsonl",
    "recipes.glue.loading",
    "recipes.glue.metrics", "recipes.lm.data",
    "recipes.lra.listops", "recipes.lra.text",
    "recipes.summarize.data", "recipes.summarize.metrics",
    "recipes.dialogue.data", "recipes.dialogue.metrics",
    "recipes.translate.data",
    # Every registered recipe: its package, `python -m` entry and `train`.
    *[f"{recipe.module}{part}" for recipe in registry.recipes()
      for part in ("", ".__main__", ".train")
      if part != ".train" or recipe.smoke],
]

_SCRIPT = """
import importlib, json, os, pkgutil, sys

import recipes

light = json.loads(sys.argv[1])
report = {"light": {}, "all": {}}
for name in light:
    importlib.import_module(name)
    report["light"][name] = {
        "KERAS_BACKEND": os.environ.get("KERAS_BACKEND"),
        "imported": sorted(m for m in ("keras", "tensorflow")
                           if m in sys.modules)}
for info in pkgutil.walk_packages(recipes.__path__, "recipes."):
    if info.name.rsplit(".", 1)[-1].startswith("make_"):
        continue  # data-building scripts under data/ folders
    importlib.import_module(info.name)
    report["all"][info.name] = os.environ.get("KERAS_BACKEND")
print("REPORT " + json.dumps(report))
"""


@once
def test_importing_recipe_modules_leaves_the_backend_alone():
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(LIGHT)], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [x for x in result.stdout.splitlines()
            if x.startswith("REPORT ")][-1]
    report = json.loads(line[len("REPORT "):])
    for name in LIGHT:
        assert report["light"][name] == {
            "KERAS_BACKEND": None, "imported": []}, name
    # The TensorFlow-only parts (models, pipelines, exports) import Keras
    # and TensorFlow, but none sets KERAS_BACKEND.
    assert "recipes.glue.model" in report["all"]
    assert "recipes.lm.model" in report["all"]
    assert "recipes.lra.model" in report["all"]
    assert set(report["all"].values()) == {None}, report["all"]


def _imported_modules(path):
    """The modules `path` imports (`import a.b`, `from a.b import c`: `a.b`
    and `a.b.c`), at any depth of the file."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}"
                         for alias in node.names)
    return names


def test_no_recipe_imports_another_recipe():
    """The layering of issue #42: a recipe is one folder over
    `recipes.core` (and the shared top-level modules); the encoder-decoder
    recipes import none of each other."""
    recipes = {"translate", "summarize", "dialogue"}
    for name in sorted(recipes):
        for path in sorted((ROOT / "recipes" / name).rglob("*.py")):
            for module in _imported_modules(path):
                parts = module.split(".")
                if parts[0] == "recipes" and len(parts) > 1:
                    assert parts[1] not in recipes - {name}, (
                        f"{path.relative_to(ROOT)} imports {module}")
