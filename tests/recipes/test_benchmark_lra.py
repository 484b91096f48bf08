"""`recipes.benchmark --preset lra`: Long Range Arena's speed table.

The preset's flags (and that flags given with it win), the table's ratios
on hand-made results, and a tiny run (small lengths and width through
flags, one repetition) whose `results.json` carries the `lra_speed` fields
with sane values on this backend. Nothing about speed is asserted.
"""

import json
import math
import os

import keras
import pytest

from recipes.benchmark import flags
from recipes.benchmark import lra_speed
from recipes.benchmark import runner
from recipes.benchmark import training

LRA_VARIANTS = ["vanilla", "dense", "factorized_dense", "random",
                "fixed_random", "factorized_random", "random+vanilla"]
TINY = ["--preset", "lra", "--lengths", "8,16", "--batch_size", "2",
        "--hidden_dim", "8", "--num_heads", "2",
        "--variants", "vanilla,factorized_random", "--repetitions", "1",
        "--warmup", "0"]


def test_the_preset_is_lras_speed_table_configuration():
    args = flags.parse(["--preset", "lra"])
    assert args.mode == "train"
    assert args.lengths == [1024, 2048, 3072, 4096]
    # LRA's byte-level text setup: width 256, 4 heads; batch 32.
    assert (args.batch_size, args.hidden_dim, args.num_heads) == (32, 256, 4)
    assert args.variants == LRA_VARIANTS
    assert args.masks == ["none"]
    # Training steps only; memory of every cell, no separate probe.
    assert args.no_forward and args.memory_batch == 0
    assert training.cells(args) == [
        (n, 32, "none") for n in (1024, 2048, 3072, 4096)]
    # Without the preset, the defaults are untouched.
    plain = flags.parse([])
    assert plain.preset is None and plain.lengths == [512]
    assert plain.batch_size is None and not plain.no_forward


def test_flags_given_with_the_preset_win():
    args = flags.parse(TINY)
    assert args.lengths == [8, 16] and args.batch_size == 2
    assert args.hidden_dim == 8 and args.num_heads == 2
    assert args.variants == ["vanilla", "factorized_random"]
    # Not given: the preset's.
    assert args.no_forward and args.memory_batch == 0
    assert args.masks == ["none"]


def test_an_unknown_preset_is_rejected(capsys):
    with pytest.raises(SystemExit):
        flags.parse(["--preset", "lra2"])
    assert "--preset" in capsys.readouterr().err


def _cell(row, length, median_ms, times_ms, memory):
    return {"row": row, "length": length, "batch": 2, "mask": "none",
            "width": 8, "heads": 2, "dtype": "float32", "memory": memory,
            "train": {"median_ms": median_ms, "times_ms": times_ms,
                      "repetitions": len(times_ms)}}


def test_speed_entries_pair_each_row_with_mha_at_its_length():
    from recipes.benchmark import training_report

    rows = [
        _cell("mha", 8, 10.0, [10.0, 10.0, 10.0], {"peak_bytes": 100}),
        _cell("random", 8, 5.0, [5.0, 5.0, 5.0], {"peak_bytes": 50}),
        _cell("mha", 16, 40.0, [40.0, 40.0, 40.0], {"peak_bytes": 400}),
        _cell("random", 16, 10.0, [10.0, 10.0, 10.0], {"peak_bytes": 100}),
    ]
    results = {"config": {"masks": ["none"]},
               "backends": [{"backend": "jax", "rows": rows}]}
    training_report.add_ratios(results)
    by = {(e["row"], e["length"]): e
          for e in lra_speed.speed_entries(results)}
    assert by["random", 8]["steps_per_s"] == pytest.approx(200.0)
    assert by["random", 8]["steps_per_s_ratio_to_mha"] == pytest.approx(2.0)
    assert by["random", 16]["steps_per_s_ratio_to_mha"] == pytest.approx(4.0)
    assert by["random", 8]["peak_bytes_ratio_to_mha"] == pytest.approx(0.5)
    assert by["random", 16]["peak_bytes_ratio_to_mha"] == pytest.approx(.25)
    assert by["mha", 16]["steps_per_s_ratio_to_mha"] == 1.0
    # No largest-tensor figure: None, not a made-up ratio.
    assert by["random", 8]["largest_tensor_bytes_ratio_to_mha"] is None
    assert "peak: XLA buffer assignment" in by["random", 8][
        "memory_measure"]


def test_a_tiny_run_gives_the_speed_table(tmp_path):
    args = flags.parse(TINY)
    worker = training.run_worker(args)
    results = {"config": runner.config_of(args), "backends": [worker]}
    assert results["config"]["preset"] == "lra"
    table = runner.summarize(results, str(tmp_path))
    for name in ("results.json", "table.md", "step_time.png",
                 "lra_speed.md", "lra_speed.png"):
        assert os.path.getsize(tmp_path / name) > 0
    with open(tmp_path / "results.json") as f:
        saved = json.load(f)
    entries = saved["lra_speed"]
    backend = keras.backend.backend()
    assert [(e["length"], e["row"]) for e in entries] == [
        (n, row) for n in (8, 16)
        for row in ("mha", "vanilla", "factorized_random")]
    for e in entries:
        assert e["backend"] == backend and e["batch"] == 2
        assert (e["width"], e["heads"]) == (8, 2)
        assert e["repetitions"] == 1
        assert math.isfinite(e["steps_per_s"]) and e["steps_per_s"] > 0
        ratio = e["steps_per_s_ratio_to_mha"]
        assert math.isfinite(ratio) and ratio > 0
        if e["row"] == "mha":
            assert ratio == 1.0
        assert e["memory_measure"] == lra_speed.MEMORY_MEASURES[backend]
        if backend == "jax":
            assert e["peak_bytes"] > 0
            # At least the step's arguments: x and y, float32.
            assert e["peak_bytes"] >= 2 * 2 * e["length"] * 8 * 4
            assert e["peak_bytes_ratio_to_mha"] > 0
        elif backend == "tensorflow":
            assert e["peak_bytes"] is None
            assert e["largest_tensor_bytes"] > 0
            assert e["largest_tensor_bytes_ratio_to_mha"] > 0
        else:
            assert e["peak_bytes"] is None
            assert e["largest_tensor_bytes"] is None
    # steps/s is the inverse of the step time the train rows report.
    rows = saved["backends"][0]["rows"]
    for e, row in zip(entries, rows):
        assert e["steps_per_s"] == pytest.approx(
            1e3 / row["train"]["median_ms"])
        assert "forward" not in row  # the preset times training steps only
    assert "LRA speed table" in table
    assert "| factorized_random |" in table
    with open(tmp_path / "lra_speed.md") as f:
        assert f.read().startswith("**LRA speed table")
