"""The entry point: one subprocess per backend, then the mode's report.

`KERAS_BACKEND` must be set before Keras is imported, so every backend runs
in a worker process of its own (`python -m recipes.benchmark ... --worker
<backend>`), one after the other; the parent merges their results and
writes the mode's report into `--model_dir`.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time

from recipes import cli
from recipes.benchmark import flags
from recipes.benchmark import stats

# The mode's worker module and report module, imported when needed (the
# parent process never imports Keras).
WORKERS = {
    "train": "recipes.benchmark.training",
    "generate": "recipes.benchmark.generation",
    "context": "recipes.benchmark.context",
    "step": "recipes.benchmark.step_profile",
}
REPORTS = {
    "train": "recipes.benchmark.training_report",
    "generate": "recipes.benchmark.report",
    "context": "recipes.benchmark.report",
    "step": "recipes.benchmark.step_profile",
}
OUTPUTS = {
    "train": "results.json, table.md, step_time.png",
    "generate": "results.json, table.md, tokens_per_s.png",
    "context": "results.json, table.md",
    "step": "results.json, table.md",
}


def config_of(args):
    config = {
        "mode": args.mode,
        "preset": args.preset,
        "lengths": args.lengths,
        "batch_size": args.batch_size,
        "hidden_dim": args.hidden_dim,
        "num_heads": args.num_heads,
        "key_dim": args.hidden_dim // args.num_heads,
        "dtype": args.dtype,
        "variants": args.variants,
        "repetitions": args.repetitions,
        "warmup": args.warmup,
        "seed": args.seed,
        "command": "python -m recipes.benchmark " + " ".join(sys.argv[1:]),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    if args.mode == "train":
        from recipes.benchmark import training

        config.update({
            "masks": args.masks,
            "mask_lengths": args.mask_lengths or args.lengths,
            "tokens": args.tokens,
            "seconds": args.seconds,
            "memory_batch": args.memory_batch,
            "memory_length": args.memory_length,
            "cells": [list(c) for c in training.cells(args)],
            # The names of the first tables (docs/benchmark.md).
            "width": args.hidden_dim,
            "heads": args.num_heads,
            "batch": args.batch_size,
        })
    else:
        config.update({
            "num_layers": args.num_layers,
            "vocabulary_size": args.vocabulary_size,
            "prompt_length": args.prompt_length,
            "memory_budget_gib": args.memory_budget_gib,
            "max_context": args.max_context,
            "feedforward_chunk_size": args.feedforward_chunk_size,
            "positions": args.positions,
            "window": args.window,
        })
    return config


def run_worker(args):
    """The mode's measurements on this process's backend."""
    module = importlib.import_module(WORKERS[args.mode])
    return module.run_worker(args)


def summarize(results, model_dir):
    """Writes the mode's report into `model_dir`; returns its table."""
    module = importlib.import_module(REPORTS[results["config"]["mode"]])
    return module.summarize(results, model_dir)


def main(argv=None):
    args = flags.parse(argv)
    if args.worker:
        # TensorFlow prints its start-up lines when imported (also by the
        # JAX worker, through Keras' utilities); import it with them hidden
        # (shown with KERAS_SYNTH_TF_LOGS=1).
        modules = ("keras",) + (("tensorflow",) if importlib.util.find_spec(
            "tensorflow") else ())
        if cli.tf_logs_wanted():
            for module in modules:
                importlib.import_module(module)
        else:
            cli.import_quietly(modules)
        import keras

        keras.config.set_floatx("float32")
        result = run_worker(args)
        with open(args.worker_out, "w") as f:
            json.dump(result, f)
        return 0
    missing = [b for b in args.backends if not flags.installed(b)]
    for backend in missing:
        stats.log(f"skipping the {backend} backend: "
                  f"{flags.BACKEND_MODULES[backend]} is not installed "
                  f"({flags.INSTALL[backend]})")
    if len(missing) == len(args.backends):
        stats.log("no backend to run")
        return 2
    model_dir = args.model_dir or os.path.join(
        "runs", "benchmark", time.strftime("%Y%m%d-%H%M%S")
    )
    os.makedirs(model_dir, exist_ok=True)
    argv = list(sys.argv[1:] if argv is None else argv)
    results = {"config": config_of(args), "backends": []}
    started = time.time()
    for backend in args.backends:
        if backend in missing:
            continue
        out = os.path.join(model_dir, f"worker-{backend}.json")
        env = dict(os.environ, KERAS_BACKEND=backend.split("_")[0])
        if not cli.tf_logs_wanted():
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        stats.log(f"starting the {backend} worker")
        code = subprocess.call(
            [sys.executable, "-m", "recipes.benchmark", *argv,
             "--worker", backend, "--worker_out", out],
            env=env,
        )
        if code != 0:
            stats.log(f"the {backend} worker failed (exit {code}); skipped")
            continue
        with open(out) as f:
            results["backends"].append(json.load(f))
    results["wall_seconds"] = time.time() - started
    results["load_average_after"] = os.getloadavg()
    if not results["backends"]:
        stats.log("no backend produced results")
        return 1
    table = summarize(results, model_dir)
    print(table)
    outputs = OUTPUTS[args.mode] + (
        ", lra_speed.md, lra_speed.png" if args.preset == "lra" else "")
    stats.log(f"results in {model_dir}: {outputs} "
              f"({results['wall_seconds'] / 60:.1f} min)")
    return 0
