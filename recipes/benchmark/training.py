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

from recipes.benchmark import flags
from recipes.benchmark import stats
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.flags import REFERENCES
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


def forward_flops(row, batch, length, width, heads, max_length=None,
                  args=None):
    """Analytic FLOPs (2 per multiply-add) of one forward pass of a row.

    Matmuls only (projections, logits, the weighted sum of values); the
    softmax and elementwise work are not counted, as usual. A convolution
    synthesizer alone runs the layer's windowed path: `K` taps per query
    instead of `S` keys. Reference rows: `references.forward_flops`.
    `args` (the parsed flags): `--synthesizer_options`, `--linformer_k`.
    """
    # Imported here: this module is imported before a backend is chosen.
    from keras_synth.layers import SynthesizerAttention
    from keras_synth.layers.synthesizers import select_options
    from keras_synth.layers.synthesizers import variants_of
    from keras_synth.layers.synthesizers.convolution import (
        ConvolutionSynthesizer,
    )

    b, t, s, d, h = batch, length, length, width, heads
    k = d // h
    if row in REFERENCES:
        from recipes.benchmark import references

        variant = {"lightconv": "light_conv",
                   "dynamicconv": "dynamic_conv"}.get(row)
        kernel_size = (flags.conv_options(args, variant)[0]
                       if args is not None and variant else 3)
        return references.forward_flops(
            row, b, t, d, h, kernel_size=kernel_size,
            projected_length=getattr(args, "linformer_k", 256))
    variant = "vanilla" if row == BASELINE else row
    layer = SynthesizerAttention(
        num_heads=h, key_dim=k, synthesizer=variant,
        max_length=max_length or length,
        synthesizer_options=select_options(
            variants_of([variant]),
            getattr(args, "synthesizer_options", None)))
    synthesizers = layer.synthesizers
    if (len(synthesizers) == 1
            and isinstance(synthesizers[0], ConvolutionSynthesizer)):
        # The windowed path: K weighted values per query; dynamic_conv's
        # projection to the taps, not their placement in a T x S matrix.
        synthesizer = synthesizers[0]
        size = synthesizer.kernel_size
        total = 2 * b * s * d * h * k + 2 * b * t * h * k * d
        total += 2 * b * h * t * size * k
        if synthesizer.batch_dependent:
            total += 2 * b * t * d * h * size
        return total
    common = 2 * b * s * d * h * k + 2 * b * t * h * k * d  # value, output
    common += 2 * b * h * t * s * k  # probabilities x values
    total = common + sum(
        synthesizer.flops(b, t, s, d) for synthesizer in synthesizers)
    if len(synthesizers) > 1:
        total += 2 * b * h * t * s * len(synthesizers)
    return total


def run_cell(backend, args, length, batch, mask, memory_only=False):
    """Times every row of one (length, batch, mask) cell; returns row dicts."""
    import keras

    names = [BASELINE] + list(args.variants) + list(args.references)
    forward = not args.no_forward and not memory_only
    rows = []
    for i, name in enumerate(names):
        keras.utils.set_random_seed(args.seed)
        layer = make_layer(name, args.num_heads, args.hidden_dim, length,
                           args.dtype, args)
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
        flops = forward_flops(row.name, batch, length, args.hidden_dim,
                              args.num_heads, args=args)
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


def check_options(args):
    """`--synthesizer_options` checked by the variants of the run (an
    option none of them has, a bad value): `SystemExit` naming the flag."""
    import argparse

    from recipes.core import model_flags

    # The convolution references take light_conv's and dynamic_conv's
    # options (kernel_size, padding).
    specs = list(args.variants) + [
        variant for reference, variant in (("lightconv", "light_conv"),
                                           ("dynamicconv", "dynamic_conv"))
        if reference in args.references] or ["vanilla"]
    names = [f"variant{i}" for i in range(len(specs))]
    namespace = argparse.Namespace(
        synthesizer_options=args.synthesizer_options,
        **dict(zip(names, specs)))
    try:
        model_flags.synthesizer_options(namespace, flags=tuple(names),
                                        max_length=max(args.lengths))
    except ValueError as error:
        raise SystemExit(str(error)) from None


def run_worker(args):
    """Runs the whole benchmark on the backend of this process."""
    import keras

    backend = Backend(args.worker)
    keras.config.set_floatx("float32")
    check_options(args)
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
