"""`--mode train`: a compiled training step and forward pass per row.

For every variant of `SynthesizerAttention` and for
`keras.layers.MultiHeadAttention` with the same `num_heads`, `key_dim`,
shapes, dtype and backend, in one process per backend, rows alternating
within every repetition after a warm-up: per row the median and spread
(25th-75th percentile) of ms/step, the ratio to MultiHeadAttention (median
of the per-repetition ratios, and their spread), achieved GFLOP/s (analytic
FLOP count, a training step counted as 3x the forward pass) and its share
of a plain matmul's GFLOP/s measured in the same run, the parameter count
and the memory of a training step: XLA's buffer assignment (arguments +
outputs + temporaries) on JAX, and on every backend where the HLO is
available the size of the largest intermediate tensor.
"""

import statistics
import time

from recipes.benchmark import stats
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.training_backends import Backend
from recipes.benchmark.training_backends import Row
from recipes.benchmark.training_backends import make_layer


def cells(args):
    """The (length, batch, mask) cells of the run, in order."""
    mask_lengths = args.mask_lengths or args.lengths
    out = []
    for length in args.lengths:
        batch = args.batch_size or max(1, args.tokens // length)
        masks = args.masks if length in mask_lengths else args.masks[:1]
        for mask in masks:
            out.append((length, batch, mask))
    return out


def forward_flops(row, batch, length, width, heads, max_length=None):
    """Analytic FLOPs (2 per multiply-add) of one forward pass of a row.

    Matmuls only (projections, logits, the weighted sum of values); the
    softmax and elementwise work are not counted, as usual.
    """
    # Imported here: this module is imported before a backend is chosen.
    from keras_synth.layers import SynthesizerAttention

    b, t, s, d, h = batch, length, length, width, heads
    k = d // h
    common = 2 * b * s * d * h * k + 2 * b * t * h * k * d  # value, output
    common += 2 * b * h * t * s * k  # probabilities x values
    variant = "vanilla" if row == BASELINE else row
    layer = SynthesizerAttention(
        num_heads=h, key_dim=k, synthesizer=variant,
        max_length=max_length or length)
    total = common + sum(
        synthesizer.flops(b, t, s, d) for synthesizer in layer.synthesizers)
    if len(layer.synthesizers) > 1:
        total += 2 * b * h * t * s * len(layer.synthesizers)
    return total


def run_cell(backend, args, length, batch, mask, memory_only=False):
    """Times every row of one (length, batch, mask) cell; returns row dicts."""
    import keras

    names = [BASELINE] + list(args.variants)
    forward = not args.no_forward and not memory_only
    rows = []
    for i, name in enumerate(names):
        keras.utils.set_random_seed(args.seed)
        layer = make_layer(name, args.num_heads, args.hidden_dim, length, args.dtype)
        row = Row(name, layer, batch, length, args.hidden_dim, mask,
                   args.seed + 1)
        start = time.perf_counter()
        backend.prepare(row, forward)
        mask_lengths = args.mask_lengths or args.lengths
        if memory_only or (not backend.name.startswith("torch")
                           and length in mask_lengths):
            row.memory = backend.memory(row)  # compiles once more
        if memory_only:
            rows.append(row)
            continue
        for kind in row.fns:
            for _ in range(1 + args.warmup):  # the first call compiles
                backend.run(row, kind)
        row.warm_s = time.perf_counter() - start
        rows.append(row)
    if not memory_only:
        # Repetitions: alternate the rows inside every repetition.
        probe = sum(backend.run(row, kind) for row in rows for kind in row.fns)
        reps = args.repetitions or int(
            min(15, max(3, args.seconds // max(probe, 1e-9)))
        )
        for _ in range(reps):
            for row in rows:
                for kind in row.fns:
                    row.times[kind].append(backend.run(row, kind))
    results = []
    for row in rows:
        flops = forward_flops(row.name, batch, length, args.hidden_dim, args.num_heads)
        entry = {
            "backend": backend.name,
            "row": row.name,
            "length": length,
            "batch": batch,
            "mask": mask,
            "width": args.hidden_dim,
            "heads": args.num_heads,
            "dtype": args.dtype,
            "params": row.params,
            "forward_flops": flops,
            "memory": row.memory,
        }
        for kind, times in row.times.items():
            if not times:
                continue
            ms = [1e3 * t for t in times]
            med = statistics.median(ms)
            step_flops = flops * (3 if kind == "train" else 1)
            entry[kind] = {
                "median_ms": med,
                "p25_ms": stats.percentile(ms, 0.25),
                "p75_ms": stats.percentile(ms, 0.75),
                "min_ms": min(ms),
                "max_ms": max(ms),
                "repetitions": len(ms),
                "gflops_per_s": step_flops / (med / 1e3) / 1e9,
                "times_ms": ms,
            }
        results.append(entry)
    return results


def run_worker(args):
    """Runs the whole benchmark on the backend of this process."""
    import keras

    backend = Backend(args.worker)
    keras.config.set_floatx("float32")
    stats.log(f"{backend.name}: plain matmul reference")
    matmul = backend.matmul_gflops()
    stats.log(f"{backend.name}: matmul 1024^3 at {matmul:.1f} GFLOP/s")
    rows = []
    plan = cells(args)
    for i, (length, batch, mask) in enumerate(plan):
        start = time.perf_counter()
        cell = run_cell(backend, args, length, batch, mask)
        for entry in cell:
            for kind in ("train", "forward"):
                if kind in entry:
                    entry[kind]["matmul_share"] = (
                        entry[kind]["gflops_per_s"] / matmul
                    )
        rows.extend(cell)
        base = next(e for e in cell if e["row"] == BASELINE)
        stats.log(
            f"{backend.name} [{i + 1}/{len(plan)}] T={length} B={batch} "
            f"mask={mask}: MHA {base['train']['median_ms']:.1f} ms/step; "
            + ", ".join(
                f"{e['row']} "
                f"{stats.paired_ratio(e['train'], base['train'])['ratio_to_mha']:.2f}x"
                for e in cell if e["row"] != BASELINE
            )
            + f" ({time.perf_counter() - start:.0f}s)"
        )
    memory = []
    if args.memory_batch and not backend.name.startswith("torch"):
        stats.log(f"{backend.name}: memory probe B={args.memory_batch} "
             f"T={args.memory_length}")
        for entry in run_cell(backend, args, args.memory_length,
                              args.memory_batch, "none", memory_only=True):
            memory.append(entry)
    return {
        "backend": backend.name,
        "keras_version": keras.__version__,
        "matmul_gflops_per_s": matmul,
        "rows": rows,
        "memory_probe": memory,
    }
