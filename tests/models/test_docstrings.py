"""The Examples in keras_synth.models' public docstrings run and print what
they say."""

import doctest
import importlib
import pkgutil

import pytest

import keras_synth.models

MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(
        keras_synth.models.__path__, "keras_synth.models."
    )
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, (
        f"{result.failed} docstring example(s) failed in {name}")


@pytest.mark.parametrize("name", keras_synth.models.__all__)
def test_public_classes_have_examples(name):
    value = getattr(keras_synth.models, name)
    if isinstance(value, type):
        assert ">>>" in value.__doc__, f"{name} has no runnable Example"
