"""Plumbing of `recipes.benchmark --mode generate` and `--mode context`.

Tiny shapes, one repetition; nothing about speed is asserted. Generation:
the rows, the paired ratio (the reference's is 1), the cache bytes per token
(values only for a pure synthesizer: half the reference's), the rows a
step reads, the table and the plot. Context: the doubling, the budget and
what limits the next length (JAX only: XLA's buffer assignment).
"""

import json
import os

import keras
import numpy as np
import pytest

from recipes.benchmark import context
from recipes.benchmark import flags
from recipes.benchmark import generation
from recipes.benchmark import runner

GENERATE = [
    "--mode", "generate", "--lengths", "12,20", "--prompt_length", "4",
    "--hidden_dim", "8", "--num_heads", "2", "--num_layers", "2",
    "--batch_size", "2", "--vocabulary_size", "11",
    "--variants", "random,dense+vanilla", "--repetitions", "1",
    "--warmup", "0",
]


def test_mean_rows_read():
    # Steps at ends 4 (the prompt's call), 5, ..., 11.
    assert generation.mean_rows_read(4, 12, 8, False, full=True) == 12
    assert generation.mean_rows_read(4, 12, 8, False, False) == np.mean(
        [4, 5, 6, 7, 8, 9, 10, 11])
    assert generation.mean_rows_read(4, 12, 8, True, False) == np.mean(
        [8, 8, 8, 8, 8, 12, 12, 12])


def test_greedy_generation_is_the_argmax_of_the_uncached_model():
    args = flags.parse(GENERATE)
    model = generation.make_model("random", args, 12)
    prompt = np.random.default_rng(0).integers(0, 11, (2, 4)).astype("int32")
    tokens = keras.ops.convert_to_numpy(generation.greedy(model, prompt, 12))
    np.testing.assert_array_equal(tokens[:, :4], prompt)
    # Each generated token is the argmax of a causal pass over the tokens
    # before it, without caches.
    embedding, blocks, head, _ = model
    x = embedding(tokens[:, :-1])
    for block in blocks:
        x = block(x)
    expected = keras.ops.convert_to_numpy(keras.ops.argmax(head(x), -1))
    np.testing.assert_array_equal(tokens[:, 4:], expected[:, 3:])


def test_generation_worker_and_report(tmp_path):
    args = flags.parse(GENERATE)
    worker = generation.run_worker(args)
    rows = worker["rows"]
    assert [(r["total_length"], r["row"]) for r in rows] == [
        (12, "hub"), (12, "random"), (12, "dense+vanilla"),
        (20, "hub"), (20, "random"), (20, "dense+vanilla"),
    ]
    for r in rows:
        assert r["generated_tokens"] == 2 * (r["total_length"] - 4)
        assert r["tokens_per_s"] > 0 and r["tokens_per_s_ratio"] > 0
        assert len(r["times_ms"]) == 1
        if r["row"] == "hub":
            assert r["tokens_per_s_ratio"] == 1.0
    by = {(r["total_length"], r["row"]): r for r in rows}
    # Per token: 2 layers x batch 2 x 2 heads x 4 dims x 4 bytes, values
    # only for random; keys and values for the reference and a mixture
    # with dot products.
    assert by[12, "random"]["cache_bytes_per_token"] == 2 * 2 * 2 * 4 * 4
    assert by[12, "hub"]["cache_bytes_per_token"] == 2 * 2 * 2 * 2 * 4 * 4
    assert by[12, "dense+vanilla"]["cache_bytes_per_token"] == (
        by[12, "hub"]["cache_bytes_per_token"])
    assert by[20, "hub"]["cache_bytes_read_per_step"] == (
        20 * by[20, "hub"]["cache_bytes_per_token"])
    results = {"config": runner.config_of(args), "backends": [worker]}
    table = runner.summarize(results, str(tmp_path))
    for name in ("results.json", "table.md", "tokens_per_s.png"):
        assert os.path.getsize(tmp_path / name) > 0
    assert "keras-hub TransformerDecoder" in table
    assert table.count("| random |") == 2
    with open(tmp_path / "results.json") as f:
        assert json.load(f)["config"]["mode"] == "generate"


CONTEXT = [
    "--mode", "context", "--lengths", "8", "--hidden_dim", "8",
    "--num_heads", "2", "--batch_size", "2", "--vocabulary_size", "11",
    "--variants", "factorized_random", "--memory_budget_gib", "0.0002",
    "--max_context", "64",
]


@pytest.mark.skipif(keras.backend.backend() == "jax",
                    reason="the context mode runs on JAX")
def test_context_needs_jax():
    with pytest.raises(SystemExit, match="--backends jax"):
        context.run_worker(flags.parse(CONTEXT))


@pytest.mark.skipif(keras.backend.backend() != "jax",
                    reason="XLA's buffer assignment is read on JAX")
def test_context_worker_and_report(tmp_path):
    args = flags.parse(CONTEXT)
    worker = context.run_worker(args)
    budget = 0.0002 * 2**30
    assert worker["budget_bytes"] == budget
    assert [r["row"] for r in worker["rows"]] == ["mha", "factorized_random"]
    for r in worker["rows"]:
        lengths = [p["length"] for p in r["probes"]]
        assert lengths == [8 * 2**i for i in range(len(lengths))]
        assert all(p["fits"] == (p["peak_bytes"] <= budget)
                   for p in r["probes"])
        fitting = [p["length"] for p in r["probes"] if p["fits"]]
        assert r["longest_length"] == (max(fitting) if fitting else None)
        # Doubling stops at the first length that does not fit, or past
        # --max_context.
        assert all(p["fits"] for p in r["probes"][:-1])
        if not r["probes"][-1]["fits"]:
            assert r["limit"] in ("parameters", "activations")
        for p in r["probes"]:
            assert 0 < p["parameter_bytes"] < p["state_bytes"]
            assert p["peak_bytes"] > p["state_bytes"]
    table = runner.summarize(
        {"config": runner.config_of(args), "backends": [worker]},
        str(tmp_path))
    assert "| MultiHeadAttention |" in table
    assert "| factorized_random |" in table
