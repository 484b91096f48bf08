"""The recipes, each declared once in its own folder.

A recipe is a package `recipes/<name>/` whose `__init__.py` defines
`RECIPE = Recipe(...)`: its name, one-line description, tiny built-in
"smoke" commands (what CI and the test harness run on every backend) and
what it exports. `recipes()` finds them by walking the `recipes` package, so
adding a recipe is adding one folder; `python -m recipes` lists them.

Pure Python: importing this module imports neither Keras nor TensorFlow.
"""

import dataclasses
import importlib
import pkgutil

# Packages under `recipes/` that are no recipe: the reason, one line.
NOT_RECIPES = {"core": "what every recipe shares"}
# Flags every smoke command ends with: a tiny model, one epoch, quiet.
SMALL = ("--hidden_dim=16", "--num_heads=2", "--num_layers=1", "--epochs=1",
         "--no_tensorboard", "--verbose=0")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One recipe's declaration (`RECIPE` in `recipes/<name>/__init__.py`).

    Args:
        name: the package name; run as `python -m recipes.<name>`.
        description: one line: what the recipe does.
        smoke: dict of smoke-command name to its arguments (a tuple of
            strings, without `--model_dir`): a built-in task that trains
            in seconds. Several per recipe where it has several tasks
            (LRA: `listops`, `text`); empty for a recipe that trains no
            model (its own tests run it).
        exports: the `results.json` keys naming what a run writes on
            every backend (`("preset",)`: a keras-hub preset folder).
        saved_model: whether a run exports a SavedModel (`results.json`
            `export`) on TensorFlow; on JAX and PyTorch it saves
            `model.keras` instead (`keras_model`) and `export_skipped`
            says why, in one line (`serving.saved_model_unsupported`).
    """

    name: str
    description: str
    smoke: dict = dataclasses.field(default_factory=dict)
    exports: tuple = ()
    saved_model: bool = False

    def __post_init__(self):
        for key, argv in self.smoke.items():
            if not isinstance(argv, tuple) or not all(
                    isinstance(a, str) and a.startswith("--") for a in argv):
                raise ValueError(
                    f"Recipe {self.name!r}: smoke command {key!r} must be a "
                    f"tuple of `--flag=value` strings. Received: {argv!r}")
            if any(a.startswith("--model_dir") for a in argv):
                raise ValueError(
                    f"Recipe {self.name!r}: smoke command {key!r} must not "
                    "set --model_dir (the caller does)")

    @property
    def module(self):
        """The module `python -m` runs: `recipes.<name>`."""
        return f"recipes.{self.name}"

    def smoke_commands(self):
        """`[(id, argv)]`: each smoke command, `id` as `name` or
        `name-key` when the recipe has several."""
        return [(self.name if len(self.smoke) == 1 else
                 f"{self.name}-{key}", list(argv))
                for key, argv in self.smoke.items()]


def package_names():
    """The names of the packages directly under `recipes/`, sorted."""
    import recipes

    return sorted(info.name for info in pkgutil.iter_modules(recipes.__path__)
                  if info.ispkg)


def recipes():
    """Every declared recipe, sorted by name.

    Raises:
        ValueError: a package under `recipes/` (not in `NOT_RECIPES`)
            defines no `RECIPE`, or one whose name is not its folder's.
    """
    found = []
    for name in package_names():
        if name in NOT_RECIPES:
            continue
        recipe = getattr(importlib.import_module(f"recipes.{name}"),
                         "RECIPE", None)
        if not isinstance(recipe, Recipe):
            raise ValueError(
                f"recipes/{name}/ declares no recipe: its __init__.py must "
                "define `RECIPE = recipes.registry.Recipe(...)` (or add the "
                f"package to `recipes.registry.NOT_RECIPES` with a reason). "
                f"Received: RECIPE={recipe!r}")
        if recipe.name != name:
            raise ValueError(
                f"recipes/{name}/ declares a recipe named {recipe.name!r}; "
                f"its name must be its folder's, {name!r}")
        found.append(recipe)
    return found


def get(name):
    """The recipe called `name`; a ValueError lists the others."""
    table = {r.name: r for r in recipes()}
    if name not in table:
        raise ValueError(f"No recipe {name!r}. Expected one of "
                         f"{', '.join(table)}.")
    return table[name]


def smoke_commands():
    """`[(id, recipe, argv)]` for every recipe's smoke commands."""
    return [(key, recipe, argv) for recipe in recipes()
            for key, argv in recipe.smoke_commands()]


def listing():
    """The text `python -m recipes` prints: one line a recipe."""
    rows = recipes()
    width = max(len(r.module) for r in rows)
    return "\n".join(f"python -m {r.module:<{width}}  {r.description}"
                     for r in rows)


__all__ = ["NOT_RECIPES", "Recipe", "SMALL", "get", "listing",
           "package_names", "recipes", "smoke_commands"]
