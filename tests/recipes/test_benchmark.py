"""Smoke test of `recipes.benchmark --mode train`'s plumbing (tiny sizes,
one repetition).

Checks the structure of the results, the table and the plot, and that the
numbers are sane (positive times, FLOP counts that match a hand count,
ratios against MultiHeadAttention); it asserts nothing about speed. The
generation and context modes: `test_benchmark_modes.py`.
"""

import json
import math
import os

import keras
import pytest

from recipes.benchmark import flags
from recipes.benchmark import runner
from recipes.benchmark import stats
from recipes.benchmark import training

TINY = [
    "--lengths", "16",
    "--masks", "none,padding",
    "--hidden_dim", "8",
    "--num_heads", "2",
    "--tokens", "32",
    "--variants", "random",
    "--repetitions", "1",
    "--warmup", "0",
    "--memory-batch", "2",
    "--memory-length", "16",
]


def test_cells_and_batch_sizes():
    args = flags.parse(TINY + ["--lengths", "8,16", "--mask-lengths", "16"])
    assert training.cells(args) == [
        (8, 4, "none"), (16, 2, "none"), (16, 2, "padding"),
    ]
    for flag in ("--batch_size", "--batch"):  # the old spelling: an alias
        args = flags.parse(TINY + [flag, "3"])
        assert {c[1] for c in training.cells(args)} == {3}


@pytest.mark.parametrize("new, old, value", [
    ("--model_dir", "--run_dir", "out"),
    ("--num_heads", "--heads", "2"),
    ("--hidden_dim", "--width", "8"),
    ("--batch_size", "--batch", "3"),
])
def test_flag_names_follow_the_recipes_with_old_aliases(new, old, value):
    dest = new[2:]
    for flag in (new, old):
        args = flags.parse([flag, value])
        assert str(getattr(args, dest)) == value
    assert new in flags.build_parser().format_help()


def test_mode_defaults():
    assert flags.parse([]).lengths == [512]
    generate = flags.parse(["--mode", "generate"])
    assert generate.lengths == [256, 512, 1024, 2048]
    assert (generate.batch_size, generate.num_layers) == (8, 4)
    context = flags.parse(["--mode", "context"])
    assert (context.lengths, context.num_layers) == ([512], 1)


@pytest.mark.parametrize("argv, message", [
    (["--hidden_dim", "10", "--num_heads", "4"], "--hidden_dim=10"),
    (["--batch_size", "0"], "--batch_size"),
    (["--mode", "generate", "--lengths", "16", "--prompt_length", "16"],
     "--prompt_length=16"),
    (["--memory_budget_gib", "0"], "--memory_budget_gib"),
    (["--feedforward_chunk_size", "-1"], "--feedforward_chunk_size"),
])
def test_bad_values_name_the_flag(argv, message):
    with pytest.raises(SystemExit, match=message):
        flags.parse(argv)


@pytest.mark.parametrize(
    "flag, value",
    [("--lengths", "8,x"), ("--masks", "none,sideways"),
     ("--variants", "randomish"), ("--backends", "numpy")],
)
def test_bad_flags_are_rejected(flag, value, capsys):
    with pytest.raises(SystemExit):
        flags.build_parser().parse_args([flag, value])
    assert flag in capsys.readouterr().err


def test_forward_flops_by_hand():
    b, t, d, h = 2, 16, 8, 2
    k = d // h
    projections = 2 * b * t * d * h * k
    mha = 4 * projections + 2 * (2 * b * h * t * t * k)
    assert training.forward_flops("mha", b, t, d, h) == mha
    assert training.forward_flops("vanilla", b, t, d, h) == mha
    # Random: value and output projections and the value product only.
    random = 2 * projections + 2 * b * h * t * t * k
    assert training.forward_flops("random", b, t, d, h) == random
    dense = random + projections + 2 * b * h * t * t * k
    assert training.forward_flops("dense", b, t, d, h) == dense
    mixture = dense + 2 * projections + 2 * b * h * t * t * k
    assert training.forward_flops(
        "dense+vanilla", b, t, d, h
    ) == mixture + 2 * b * h * t * t * 2


def test_worker_and_report(tmp_path):
    args = flags.parse(TINY)
    worker = training.run_worker(args)
    backend = keras.backend.backend()
    assert worker["backend"] == backend
    assert worker["matmul_gflops_per_s"] > 0
    rows = worker["rows"]
    # 2 cells x (MultiHeadAttention + 1 variant)
    assert len(rows) == 4
    assert {r["row"] for r in rows} == {"mha", "random"}
    for r in rows:
        assert r["backend"] == backend
        assert r["params"] > 0
        assert r["forward_flops"] == training.forward_flops(
            r["row"], r["batch"], r["length"], 8, 2
        )
        for kind in ("train", "forward"):
            timing = r[kind]
            assert timing["repetitions"] == 1
            assert 0 < timing["min_ms"] <= timing["median_ms"] <= timing[
                "max_ms"]
            assert timing["gflops_per_s"] > 0
            assert timing["matmul_share"] > 0
    # Parameters: MultiHeadAttention at width 8, 2 heads of 4: 4 * (8*8+8).
    mha = next(r for r in rows if r["row"] == "mha")
    assert mha["params"] == 4 * (8 * 8 + 8)
    random = next(r for r in rows if r["row"] == "random")
    assert random["params"] == 2 * (8 * 8 + 8) + 2 * 16 * 16
    if backend != "torch":
        # Memory: per row at the mask lengths, and the probe.
        assert rows[-1]["memory"]["largest_tensor_bytes"] > 0
        assert len(worker["memory_probe"]) == 2
        for entry in worker["memory_probe"]:
            assert entry["memory"]["largest_tensor_bytes"] > 0
            if backend == "jax":
                assert entry["memory"]["peak_bytes"] > 0

    results = {"config": runner.config_of(args), "backends": [worker]}
    table = runner.summarize(results, str(tmp_path))
    for name in ("results.json", "table.md", "step_time.png"):
        assert os.path.getsize(tmp_path / name) > 0
    with open(tmp_path / "results.json") as f:
        saved = json.load(f)
    for r in saved["backends"][0]["rows"]:
        ratio = r["train"]["ratio_to_mha"]
        assert math.isfinite(ratio) and ratio > 0
        if r["row"] == "mha":
            assert ratio == 1.0
    assert "MultiHeadAttention" in table and "| random |" in table
    assert table.count("\n| 16 | 2 | padding |") == 2
    if backend != "torch":
        assert "Memory of a training step" in table


def test_ratio_is_the_median_of_paired_repetitions():
    # Rows alternate inside every repetition: the ratio pairs each time with
    # MultiHeadAttention's from the same repetition, so a drift of the
    # machine between repetitions (here 10 -> 40 ms) cancels out.
    row = {"median_ms": 20.0, "times_ms": [12.0, 20.0, 40.0]}
    mha = {"median_ms": 10.0, "times_ms": [10.0, 10.0, 40.0]}
    ratio = stats.paired_ratio(row, mha)
    assert ratio["ratio_to_mha"] == pytest.approx(1.2)
    assert ratio["ratio_p25"] == pytest.approx(1.1)
    assert ratio["ratio_p75"] == pytest.approx(1.6)
    assert ratio["ratio_of_medians"] == pytest.approx(2.0)
    # Without per-repetition times of the same count: ratio of medians.
    del row["times_ms"]
    assert stats.paired_ratio(row, mha) == {
        "ratio_to_mha": 2.0, "ratio_of_medians": 2.0,
    }


def test_default_backends_are_the_installed_ones(monkeypatch):
    present = {"tensorflow"}  # what the `recipes` extra installs
    monkeypatch.setattr(flags, "installed", lambda b: (
        flags.BACKEND_MODULES[b] in present))
    assert flags.parse([]).backends == ["tensorflow"]
    present.add("jax")
    assert flags.parse([]).backends == ["tensorflow", "jax"]
    present.clear()
    present.add("torch")
    assert flags.parse([]).backends == ["torch"]
    present.clear()
    with pytest.raises(SystemExit, match="no Keras backend is installed"):
        flags.parse([])
    # Given but not installed: parsed (a valid name), skipped by the runner.
    assert flags.parse(["--backends", "jax"]).backends == ["jax"]


def test_a_missing_backend_is_one_line_and_nothing_run_exits_nonzero(
        monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(flags, "installed", lambda b: b == "tensorflow")
    started = []
    monkeypatch.setattr(runner.subprocess, "call",
                        lambda *a, **k: started.append(a) or 1)
    code = runner.main(TINY + ["--backends", "jax,torch",
                               "--model_dir", str(tmp_path)])
    assert code == 2 and started == []
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].endswith(
        'skipping the jax backend: jax is not installed '
        '(pip install "keras-synth[jax]")')
    assert "skipping the torch backend: torch is not installed" in lines[1]
    assert lines[2].endswith("no backend to run")
    # One of two missing: the other runs (here it fails: exit 1, no results).
    code = runner.main(TINY + ["--backends", "jax,tensorflow",
                               "--model_dir", str(tmp_path)])
    assert len(started) == 1 and code == 1
    assert "--worker" in started[0][0] and "tensorflow" in started[0][0]
