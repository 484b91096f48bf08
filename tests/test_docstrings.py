"""The Examples in public docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import keras_synth.layers

MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(
        keras_synth.layers.__path__, "keras_synth.layers."
    )
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_public_layers_have_examples():
    for name in keras_synth.layers.__all__:
        doc = getattr(keras_synth.layers, name).__doc__
        assert ">>>" in doc, f"{name} has no runnable Example"
