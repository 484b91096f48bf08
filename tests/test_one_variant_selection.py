"""`KERAS_SYNTH_ONE_VARIANT=1` (the keras-hub floor check, .ci/check_keras_hub)
keeps, per test, the first synthesizer variant with every value of the
test's other arguments, and reports the rest as deselected."""

import types

from tests import conftest


def _item(nodeid, **params):
    return types.SimpleNamespace(nodeid=nodeid,
                                 callspec=types.SimpleNamespace(params=params))


class _Config:
    def __init__(self):
        self.deselected = []
        self.hook = types.SimpleNamespace(
            pytest_deselected=lambda items: self.deselected.extend(items))


def _select(items, monkeypatch, value):
    monkeypatch.setenv("KERAS_SYNTH_ONE_VARIANT", value)
    config = _Config()
    conftest.pytest_collection_modifyitems(config, items)
    return [i.nodeid for i in items], [i.nodeid for i in config.deselected]


def test_first_variant_per_test_and_other_arguments(monkeypatch):
    items = [
        _item("t.py::a[dense-x]", synthesizer="dense", kind="x"),
        _item("t.py::a[random-x]", synthesizer="random", kind="x"),
        _item("t.py::a[random-y]", synthesizer="random", kind="y"),
        _item("t.py::a[dense-y]", synthesizer="dense", kind="y"),
        _item("t.py::b[vanilla]", variant="vanilla"),
        _item("t.py::b[dense]", variant="dense"),
        _item("t.py::c[3]", size=3),
        _item("t.py::c[4]", size=4),
        types.SimpleNamespace(nodeid="t.py::d"),
    ]
    kept, dropped = _select(items, monkeypatch, "1")
    assert kept == ["t.py::a[dense-x]", "t.py::a[random-y]",
                    "t.py::b[vanilla]", "t.py::c[3]", "t.py::c[4]", "t.py::d"]
    assert dropped == ["t.py::a[random-x]", "t.py::a[dense-y]",
                       "t.py::b[dense]"]


def test_unset_keeps_everything(monkeypatch):
    items = [_item("t.py::a[dense]", synthesizer="dense"),
             _item("t.py::a[random]", synthesizer="random")]
    kept, dropped = _select(items, monkeypatch, "")
    assert kept == ["t.py::a[dense]", "t.py::a[random]"] and dropped == []
