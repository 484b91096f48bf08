"""The Examples in public docstrings run and print what they say, for every
public subpackage (`layers`, `models`, `samplers`)."""

import doctest
import importlib
import pkgutil

import pytest

import keras_synth.layers
import keras_synth.models
import keras_synth.samplers

PACKAGES = (keras_synth.layers, keras_synth.models, keras_synth.samplers)

MODULES = sorted(
    info.name
    for package in PACKAGES
    # Every module below the package, in its sub-packages too.
    for info in pkgutil.walk_packages(package.__path__,
                                      package.__name__ + ".")
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)

PUBLIC = [
    (package.__name__, name) for package in PACKAGES
    for name in package.__all__
]


def test_modules_of_the_sub_packages_are_collected():
    for name in ("keras_synth.layers.attention.synthesizer_attention",
                 "keras_synth.layers.synthesizers.registry",
                 "keras_synth.layers.blocks.encoder",
                 "keras_synth.models.synthesizer_encoder.synthesizer_backbone"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, (
        f"{result.failed} docstring example(s) failed in {name}")
    if name.startswith("keras_synth.samplers."):
        assert result.attempted > 0, f"{name} has no docstring example"


@pytest.mark.parametrize("package, name", PUBLIC,
                         ids=[f"{p}.{n}" for p, n in PUBLIC])
def test_public_classes_have_examples(package, name):
    value = getattr(importlib.import_module(package), name)
    if isinstance(value, type):
        assert ">>>" in value.__doc__, (
            f"{package}.{name} has no runnable Example")
