"""tests/recipes/harness_table.py: the docs' recipe x backend table from
the harness's junit XML files."""

import json

import pytest

from tests.recipes import harness_table

CASE = ('<testcase classname="tests.recipes.test_harness" '
        'name="test_recipe_trains_resumes_after_a_kill_and_exports[{key}]" '
        'time="{time}">{body}</testcase>')


def _passed(key, time, losses, diff, exports):
    properties = "".join(
        f'<property name="{name}" value="{value}"/>'
        for name, value in (
            ("losses", json.dumps({"uninterrupted": losses,
                                   "resumed": losses}).replace('"', "&quot;")),
            ("max_rel_diff", diff),
            ("exports", json.dumps(exports).replace('"', "&quot;"))))
    return CASE.format(key=key, time=time,
                       body=f"<properties>{properties}</properties>")


def _write(path, *cases):
    path.write_text('<?xml version="1.0"?><testsuites><testsuite>'
                    + "".join(cases) + "</testsuite></testsuites>")
    return str(path)


def test_one_row_per_recipe_one_cell_per_backend(tmp_path):
    jax = _write(tmp_path / "harness-jax.xml",
                 _passed("glue", 85.2, [0.68961, 0.64138], 0.0,
                         ["keras_model", "preset"]),
                 CASE.format(key="lm", time=12,
                             body='<failure message="x">boom</failure>'))
    tensorflow = _write(tmp_path / "harness-tensorflow.xml",
                        _passed("glue", 158, [0.686, 0.6201], 2.4e-6,
                                ["export", "preset"]))
    # Columns in the order tensorflow, jax, torch whatever the order given.
    assert harness_table.table([jax, tensorflow]).splitlines() == [
        "| recipe | tensorflow | jax |",
        "|---|---|---|",
        "| glue | equal: 0.6860, 0.6201 (rel. diff 2e-06); export, preset; "
        "158 s | equal: 0.6896, 0.6414 (rel. diff 0); keras_model, preset; "
        "85 s |",
        "| lm | not run | **failed** (12 s) |",
    ]


def test_a_file_name_must_name_one_backend(tmp_path):
    path = _write(tmp_path / "harness.xml")
    with pytest.raises(SystemExit, match="harness.xml.*must name one of"):
        harness_table.table([path])
