"""`--mode step`: the time of one cached decoding step against its position.

`--mode generate` times whole generations; this mode takes them apart. The
same models (`generation.make_model`: keras-hub's `TransformerDecoder`
blocks as the reference, `SynthesizerDecoder` blocks for every variant),
their caches of `--lengths` positions filled with random values, run
`--window` greedy steps starting at each position of `--positions`, compiled
as in generation (TensorFlow: XLA, JAX: jit; a loop of steps, so that the
caches are updated in place as they are when generating). Per row and
position: milliseconds per step. A least-squares line over the positions
splits a step into a part that does not depend on the position
(projections, feed-forward, output layer, the loop's own overhead) and a
part per cached row read; the mean over the positions of a generation to
the whole length is what `--mode generate` sees.
"""

import statistics
import time

from recipes.benchmark import generation
from recipes.benchmark import stats


def default_positions(total_length, window):
    """Five positions from the start to the last window of the cache."""
    last = total_length - window
    return sorted({max(1, round(last * f)) for f in (0, .25, .5, .75, 1)})


def filled_caches(model, seed):
    """The model's caches, every entry drawn from a normal distribution."""
    import keras
    from keras import tree

    generator = keras.random.SeedGenerator(seed)
    return tree.map_structure(
        lambda c: keras.random.normal(keras.ops.shape(c), dtype=c.dtype,
                                      seed=generator),
        model[3]())


def steps_from(model, token, caches, start, count):
    """`count` greedy steps from position `start`; returns the last token."""
    from keras import ops

    def step(index, state):
        token, caches = state
        return generation.decode(model, token[:, None], caches, index)

    token, _ = ops.fori_loop(start, start + count, step, (token, caches))
    return token


def fit_line(positions, ms):
    """`(intercept, slope)` of the least-squares line `ms = a + b * p`."""
    mean_p, mean_ms = statistics.fmean(positions), statistics.fmean(ms)
    spread = sum((p - mean_p) ** 2 for p in positions)
    slope = sum((p - mean_p) * (m - mean_ms)
                for p, m in zip(positions, ms)) / spread if spread else 0.0
    return mean_ms - slope * mean_p, slope


def run_worker(args):
    """Times `--window` steps at every position, for every row."""
    import keras
    import numpy as np

    backend = keras.backend.backend()
    rows = [generation.REFERENCE] + list(args.variants)
    repetitions = args.repetitions or 5
    results = []
    for total_length in args.lengths:
        positions = args.positions or default_positions(total_length,
                                                        args.window)
        token = np.zeros((args.batch_size,), "int32")
        for row in rows:
            keras.utils.set_random_seed(args.seed)
            model = generation.make_model(row, args, total_length)
            caches = filled_caches(model, args.seed)
            fn = generation.compile_fn(
                model, lambda t, c, s: steps_from(model, t, c, s,
                                                  args.window))
            ms = []
            for position in positions:
                start = np.int32(position)
                for _ in range(1 + args.warmup):  # the first one compiles
                    fn(token, caches, start)
                times = []
                for _ in range(repetitions):
                    begin = time.perf_counter()
                    fn(token, caches, start)
                    times.append(time.perf_counter() - begin)
                ms.append(1e3 * statistics.median(times) / args.window)
            intercept, slope = fit_line(positions, ms)
            results.append({
                "backend": backend, "row": row,
                "total_length": total_length, "batch": args.batch_size,
                "window": args.window, "positions": positions,
                "ms_per_step": ms,
                "fixed_ms": intercept,
                "ms_per_1k_positions": 1e3 * slope,
                "cache_bytes_per_token":
                    generation.cache_bytes_per_token(model, total_length),
            })
            stats.log(f"{backend} {row} to {total_length}: " + ", ".join(
                f"{p}: {m:.2f} ms" for p, m in zip(positions, ms)))
    return {"backend": backend, "keras_version": keras.__version__,
            "rows": results}


def step_table(results):
    """Markdown: ms per step at each position, the fitted line, and the
    mean step of a whole generation against the reference's."""
    lines = []
    for part in results["backends"]:
        rows = part["rows"]
        for total_length in sorted({r["total_length"] for r in rows}):
            cells = [r for r in rows if r["total_length"] == total_length]
            positions = cells[0]["positions"]
            reference = statistics.fmean(cells[0]["ms_per_step"])
            lines += [
                f"**{part['backend']}**, caches of {total_length} positions,"
                f" batch {cells[0]['batch']}: ms per step at position",
                "",
                "| row | " + " | ".join(str(p) for p in positions)
                + " | fixed ms | ms per 1k positions | tokens/s x reference"
                " (mean step) |",
                "|---" * (len(positions) + 4) + "|",
            ]
            for r in cells:
                mean = statistics.fmean(r["ms_per_step"])
                lines.append(
                    f"| {r['row']} | "
                    + " | ".join(f"{m:.2f}" for m in r["ms_per_step"])
                    + f" | {r['fixed_ms']:.2f} | "
                    f"{r['ms_per_1k_positions']:.2f} | {reference / mean:.2f} |")
            lines.append("")
    return "\n".join(lines)


def summarize(results, run_dir):
    """Writes results.json and table.md; returns the table."""
    import json
    import os

    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = step_table(results)
    with open(os.path.join(run_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    return table
