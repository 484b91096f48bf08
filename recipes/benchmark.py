"""Side-by-side speed and memory benchmark: Synthesizers against MultiHeadAttention.

`python -m recipes.benchmark` times, for every variant of `SynthesizerAttention`
and for `keras.layers.MultiHeadAttention` with the same `num_heads`, `key_dim`,
shapes, dtype and backend:

- a compiled training step (forward, backward, optimizer update), and
- a compiled forward pass,

in one process per backend, rows alternating within every repetition, after a
warm-up, and reports per row the median and spread (25th-75th percentile) of
ms/step, the ratio to MultiHeadAttention (median of the per-repetition
ratios, and their spread), achieved GFLOP/s (analytic FLOP
count, a training step counted as 3x the forward pass) and its share of a
plain matmul's GFLOP/s measured in the same run, the parameter count and the
memory of a training step: XLA's buffer assignment (arguments + outputs +
temporaries) on JAX, and on every backend where the HLO is available the size
of the largest intermediate tensor.

Backends run one after the other in subprocesses (`KERAS_BACKEND` must be set
before Keras is imported); TensorFlow steps are compiled with XLA
(`jit_compile=True`), JAX steps with `jax.jit`, PyTorch runs eagerly.

Output, in `--run_dir` (default `runs/benchmark/<timestamp>`):
`results.json`, `table.md` (also printed), and `step_time.png` (training-step
time against sequence length, one panel per backend).

Example (a few minutes on 2 CPU cores):

    python -m recipes.benchmark --lengths 512 --masks none,padding,causal

The full sweep of the README (lengths 128 to 2048, batch = tokens / length):

    python -m recipes.benchmark --lengths 128,256,512,1024,2048 \
        --masks none,padding,causal --mask_lengths 512
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

VARIANTS = (
    "random",
    "fixed_random",
    "factorized_random",
    "dense",
    "factorized_dense",
    "random+vanilla",
    "dense+vanilla",
    "vanilla",
)
# `vanilla` is dot-product attention inside SynthesizerAttention: timed on
# request only, MultiHeadAttention is the baseline of every run.
DEFAULT_VARIANTS = VARIANTS[:-1]
BASELINE = "mha"
MASKS = ("none", "padding", "causal")
BACKENDS = ("tensorflow", "jax", "torch")


# --------------------------------------------------------------------- args


def _int_list(text):
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, received {text!r}"
        )
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected positive integers, received {text!r}"
        )
    return values


def _choice_list(choices):
    def parse(text):
        values = [v.strip() for v in str(text).split(",") if v.strip()]
        bad = [v for v in values if v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated subset of {list(choices)}, "
                f"received {text!r}"
            )
        return values

    return parse


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m recipes.benchmark",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backends", type=_choice_list(BACKENDS),
        default=["tensorflow", "jax"],
        help="Keras backends, run one after the other (default: "
        "tensorflow,jax; torch runs eagerly).",
    )
    parser.add_argument(
        "--variants", type=_choice_list(VARIANTS),
        default=list(DEFAULT_VARIANTS),
        help="synthesizer variants (default: all but vanilla; "
        "MultiHeadAttention is always timed).",
    )
    parser.add_argument(
        "--lengths", type=_int_list, default=[512],
        help="sequence lengths T = S (default 512).",
    )
    parser.add_argument(
        "--masks", type=_choice_list(MASKS), default=["none"],
        help="masks: none, padding (key padding, value_mask of shape (B, S),"
        " each example keeping a random 50-100%% of its keys), causal.",
    )
    parser.add_argument(
        "--mask_lengths", "--mask-lengths", type=_int_list, default=None,
        help="lengths at which every mask of --masks is timed; other lengths"
        " time the first mask only (default: all lengths).",
    )
    parser.add_argument(
        "--batch", type=int, default=None,
        help="batch size; default: --tokens // length (at least 1).",
    )
    parser.add_argument(
        "--tokens", type=int, default=4096,
        help="tokens per batch when --batch is not given (default 4096: "
        "batch 8 at length 512).",
    )
    parser.add_argument("--width", type=int, default=256,
                        help="model width d (default 256).")
    parser.add_argument("--heads", type=int, default=4,
                        help="number of heads (default 4); key_dim = width "
                        "// heads.")
    parser.add_argument("--dtype", default="float32",
                        choices=("float32", "mixed_bfloat16",
                                 "mixed_float16"),
                        help="dtype policy (default float32).")
    parser.add_argument(
        "--repetitions", type=int, default=None,
        help="timed repetitions per row; default: as many as fit in "
        "--seconds per cell, between 3 and 15.",
    )
    parser.add_argument(
        "--seconds", type=float, default=20.0,
        help="time budget of the timed repetitions of one (length, mask) "
        "cell, all rows together (default 20).",
    )
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps per row after compilation.")
    parser.add_argument(
        "--memory_batch", "--memory-batch", type=int, default=32,
        help="batch of the peak-memory probe (default 32; 0 disables it).",
    )
    parser.add_argument(
        "--memory_length", "--memory-length", type=int, default=1024,
        help="length of the peak-memory probe (default 1024).",
    )
    parser.add_argument("--no_forward", "--no-forward", action="store_true",
                        help="time training steps only.")
    parser.add_argument("--run_dir", "--run-dir", default=None,
                        help="output folder (default runs/benchmark/<time>).")
    parser.add_argument("--seed", type=int, default=0)
    # Internal: one backend in this process, results to --worker-out.
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker_out", "--worker-out", default=None,
                        help=argparse.SUPPRESS)
    return parser


def _check_args(args):
    for name in ("width", "heads", "tokens", "warmup"):
        value = getattr(args, name)
        if value < (0 if name == "warmup" else 1):
            raise SystemExit(f"--{name} must be positive, received {value}")
    if args.width % args.heads:
        raise SystemExit(
            f"--width={args.width} must be a multiple of --heads={args.heads}"
        )
    if args.batch is not None and args.batch < 1:
        raise SystemExit(f"--batch must be positive, received {args.batch}")
    if args.repetitions is not None and args.repetitions < 1:
        raise SystemExit("--repetitions must be positive")


def cells(args):
    """The (length, batch, mask) cells of the run, in order."""
    mask_lengths = args.mask_lengths or args.lengths
    out = []
    for length in args.lengths:
        batch = args.batch or max(1, args.tokens // length)
        masks = args.masks if length in mask_lengths else args.masks[:1]
        for mask in masks:
            out.append((length, batch, mask))
    return out


# -------------------------------------------------------------- FLOP counts


def forward_flops(row, batch, length, width, heads, max_length=None):
    """Analytic FLOPs (2 per multiply-add) of one forward pass of a row.

    Matmuls only (projections, logits, the weighted sum of values); the
    softmax and elementwise work are not counted, as usual.
    """
    from keras_synth.layers.synthesizer_attention import (
        default_factorized_dense_sizes,
    )

    b, t, s, d, h = batch, length, length, width, heads
    k = d // h
    max_length = max_length or length
    common = 2 * b * s * d * h * k + 2 * b * t * h * k * d  # value, output
    common += 2 * b * h * t * s * k  # probabilities x values
    qk = 2 * b * t * d * h * k + 2 * b * s * d * h * k + 2 * b * h * t * s * k
    if row in (BASELINE, "vanilla"):
        return common + qk
    total = common
    for part in row.split("+"):
        if part == "vanilla":
            total += qk
        elif part == "dense":
            total += 2 * b * t * d * h * k + 2 * b * h * t * s * k
        elif part == "factorized_dense":
            a, c = default_factorized_dense_sizes(max_length)
            total += 2 * b * t * d * h * k + 2 * b * t * h * k * (a + c)
            total += b * h * t * a * c
        elif part == "factorized_random":
            total += 2 * h * t * s * 8
    if "+" in row:
        total += 2 * b * h * t * s * len(row.split("+"))
    return total


# ------------------------------------------------------------------ workers


def _largest_hlo_tensor(hlo_text):
    """Bytes of the largest array shape named in an HLO module's text."""
    import re

    sizes = {"f32": 4, "s32": 4, "u32": 4, "f16": 2, "bf16": 2, "pred": 1,
             "f64": 8, "s64": 8, "u8": 1, "s8": 1}
    largest = 0
    for dtype, dims in re.findall(r"\b(f32|s32|u32|f16|bf16|pred|f64|s64|"
                                  r"u8|s8)\[([0-9,]*)\]", hlo_text):
        n = 1
        for v in dims.split(","):
            if v:
                n *= int(v)
        largest = max(largest, n * sizes[dtype])
    return largest


class _Row:
    """One timed configuration: a layer, its data and compiled functions."""

    def __init__(self, name, layer, batch, length, width, mask, seed):
        import numpy as np

        self.name = name
        self.layer = layer
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((batch, length, width)).astype("float32")
        self.y = rng.standard_normal((batch, length, width)).astype("float32")
        self.mask_kind = mask
        self.value_mask = None
        if mask == "padding":
            lengths = rng.integers(length // 2, length + 1, size=batch)
            lengths[0] = length
            self.value_mask = np.arange(length)[None, :] < lengths[:, None]
        self.causal = mask == "causal"
        self.times = {"train": [], "forward": []}
        self.memory = {}

    def call(self, x, value_mask, training=None):
        kwargs = {}
        if value_mask is not None:
            kwargs["value_mask"] = value_mask
        if self.causal:
            kwargs["use_causal_mask"] = True
        return self.layer(x, x, training=training, **kwargs)


def _make_layer(name, heads, width, length, dtype):
    import keras

    from keras_synth.layers import SynthesizerAttention

    key_dim = width // heads
    if name == BASELINE:
        return keras.layers.MultiHeadAttention(
            num_heads=heads, key_dim=key_dim, dtype=dtype, name="mha"
        )
    return SynthesizerAttention(
        num_heads=heads, key_dim=key_dim, synthesizer=name, max_length=length,
        dtype=dtype, name=name.replace("+", "_"),
    )


class _Backend:
    """Compiles and runs training steps and forward passes of `_Row`s."""

    def __init__(self):
        import keras

        self.name = keras.backend.backend()

    # Each method below is specialised by backend.
    def prepare(self, row, forward):
        getattr(self, f"_prepare_{self.name}")(row, forward)

    def memory(self, row):
        fn = getattr(self, f"_memory_{self.name}", None)
        return fn(row) if fn else {}

    def run(self, row, kind):
        start = time.perf_counter()
        row.fns[kind]()
        return time.perf_counter() - start

    def matmul_gflops(self, n=1024, repetitions=5):
        fn = getattr(self, f"_matmul_{self.name}")(n)
        fn()
        fn()
        times = []
        for _ in range(repetitions):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return 2 * n**3 / statistics.median(times) / 1e9

    # ---------------------------------------------------------- tensorflow

    def _prepare_tensorflow(self, row, forward):
        import keras
        import tensorflow as tf

        layer = row.layer
        x = tf.constant(row.x)
        y = tf.constant(row.y)
        mask = None if row.value_mask is None else tf.constant(row.value_mask)
        layer(x, x)  # build
        optimizer = keras.optimizers.Adam(1e-4)
        optimizer.build(layer.trainable_variables)

        def train(x, y, mask):
            with tf.GradientTape() as tape:
                out = row.call(x, mask, training=True)
                loss = tf.reduce_mean(tf.square(tf.cast(out, "float32") - y))
            grads = tape.gradient(loss, layer.trainable_variables)
            optimizer.apply(grads, layer.trainable_variables)
            return loss

        def fwd(x, mask):
            return row.call(x, mask, training=False)

        train_fn = tf.function(train, jit_compile=True)
        fwd_fn = tf.function(fwd, jit_compile=True)
        row.fns = {"train": lambda: train_fn(x, y, mask).numpy()}
        if forward:
            row.fns["forward"] = lambda: fwd_fn(x, mask).numpy()
        row._tf = (train_fn, x, y, mask)
        row.params = int(sum(math.prod(v.shape) for v in layer.weights))

    def _memory_tensorflow(self, row):
        train_fn, x, y, mask = row._tf
        hlo = train_fn.experimental_get_compiler_ir(x, y, mask)(
            stage="optimized_hlo"
        )
        return {"largest_tensor_bytes": _largest_hlo_tensor(hlo)}

    def _matmul_tensorflow(self, n):
        import tensorflow as tf

        a = tf.random.normal((n, n))
        b = tf.random.normal((n, n))
        fn = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=True)
        return lambda: fn(a, b).numpy()

    # ----------------------------------------------------------------- jax

    def _prepare_jax(self, row, forward):
        import jax
        import jax.numpy as jnp
        import keras

        layer = row.layer
        x = jnp.asarray(row.x)
        y = jnp.asarray(row.y)
        mask = None if row.value_mask is None else jnp.asarray(row.value_mask)
        layer(x, x)  # build
        optimizer = keras.optimizers.Adam(1e-4)
        optimizer.build(layer.trainable_variables)
        kwargs = {}
        if mask is not None:
            kwargs["value_mask"] = mask
        if row.causal:
            kwargs["use_causal_mask"] = True

        def loss_fn(tv, ntv, x, y, mask):
            kw = dict(kwargs)
            if mask is not None:
                kw["value_mask"] = mask
            out, ntv = layer.stateless_call(tv, ntv, x, x, training=True,
                                            **kw)
            loss = jnp.mean(jnp.square(out.astype("float32") - y))
            return loss, ntv

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

        def train(tv, ntv, ov, x, y, mask):
            (loss, ntv), grads = grad_fn(tv, ntv, x, y, mask)
            tv, ov = optimizer.stateless_apply(ov, grads, tv)
            return loss, tv, ntv, ov

        def fwd(tv, ntv, x, mask):
            kw = dict(kwargs)
            if mask is not None:
                kw["value_mask"] = mask
            out, _ = layer.stateless_call(tv, ntv, x, x, training=False, **kw)
            return out

        state = {
            "tv": [v.value for v in layer.trainable_variables],
            "ntv": [v.value for v in layer.non_trainable_variables],
            "ov": [v.value for v in optimizer.variables],
        }
        train_fn = jax.jit(train, donate_argnums=(0, 2))
        fwd_fn = jax.jit(fwd)

        def run_train():
            loss, state["tv"], state["ntv"], state["ov"] = train_fn(
                state["tv"], state["ntv"], state["ov"], x, y, mask
            )
            loss.block_until_ready()

        def run_fwd():
            fwd_fn(state["tv"], state["ntv"], x, mask).block_until_ready()

        row.fns = {"train": run_train}
        if forward:
            row.fns["forward"] = run_fwd
        row._jax = (train_fn, state, x, y, mask)
        row.params = int(sum(math.prod(v.shape) for v in layer.weights))

    def _memory_jax(self, row):
        train_fn, state, x, y, mask = row._jax
        compiled = train_fn.lower(
            state["tv"], state["ntv"], state["ov"], x, y, mask
        ).compile()
        out = {"largest_tensor_bytes": _largest_hlo_tensor(compiled.as_text())}
        stats = compiled.memory_analysis()
        if stats is not None:
            out["peak_bytes"] = int(
                stats.argument_size_in_bytes + stats.output_size_in_bytes
                + stats.temp_size_in_bytes - stats.alias_size_in_bytes
            )
            out["temp_bytes"] = int(stats.temp_size_in_bytes)
        return out

    def _matmul_jax(self, n):
        import jax
        import jax.numpy as jnp

        a = jax.random.normal(jax.random.PRNGKey(0), (n, n))
        b = jax.random.normal(jax.random.PRNGKey(1), (n, n))
        fn = jax.jit(jnp.matmul)
        return lambda: fn(a, b).block_until_ready()

    # --------------------------------------------------------------- torch

    def _prepare_torch(self, row, forward):
        import keras
        import torch

        layer = row.layer
        x = torch.as_tensor(row.x)
        y = torch.as_tensor(row.y)
        mask = (None if row.value_mask is None
                else torch.as_tensor(row.value_mask))
        layer(x, x)  # build
        optimizer = keras.optimizers.Adam(1e-4)
        optimizer.build(layer.trainable_variables)
        variables = layer.trainable_variables

        def run_train():
            out = row.call(x, mask, training=True)
            loss = torch.mean(torch.square(out.float() - y))
            for v in variables:
                v.value.grad = None
            loss.backward()
            grads = [v.value.grad for v in variables]
            with torch.no_grad():
                optimizer.apply(grads, variables)

        def run_fwd():
            with torch.no_grad():
                row.call(x, mask, training=False)

        row.fns = {"train": run_train}
        if forward:
            row.fns["forward"] = run_fwd
        row.params = int(sum(math.prod(v.shape) for v in layer.weights))

    def _matmul_torch(self, n):
        import torch

        a = torch.randn(n, n)
        b = torch.randn(n, n)
        return lambda: torch.matmul(a, b)


def _log(message):
    print(f"[benchmark {time.strftime('%H:%M:%S')}] {message}",
          file=sys.stderr, flush=True)


def _percentile(values, q):
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    pos = (len(values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def run_cell(backend, args, length, batch, mask, memory_only=False):
    """Times every row of one (length, batch, mask) cell; returns row dicts."""
    import keras

    names = [BASELINE] + list(args.variants)
    forward = not args.no_forward and not memory_only
    rows = []
    for i, name in enumerate(names):
        keras.utils.set_random_seed(args.seed)
        layer = _make_layer(name, args.heads, args.width, length, args.dtype)
        row = _Row(name, layer, batch, length, args.width, mask,
                   args.seed + 1)
        start = time.perf_counter()
        backend.prepare(row, forward)
        mask_lengths = args.mask_lengths or args.lengths
        if memory_only or (backend.name != "torch"
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
        flops = forward_flops(row.name, batch, length, args.width, args.heads)
        entry = {
            "backend": backend.name,
            "row": row.name,
            "length": length,
            "batch": batch,
            "mask": mask,
            "width": args.width,
            "heads": args.heads,
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
                "p25_ms": _percentile(ms, 0.25),
                "p75_ms": _percentile(ms, 0.75),
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

    backend = _Backend()
    keras.config.set_floatx("float32")
    _log(f"{backend.name}: plain matmul reference")
    matmul = backend.matmul_gflops()
    _log(f"{backend.name}: matmul 1024^3 at {matmul:.1f} GFLOP/s")
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
        _log(
            f"{backend.name} [{i + 1}/{len(plan)}] T={length} B={batch} "
            f"mask={mask}: MHA {base['train']['median_ms']:.1f} ms/step; "
            + ", ".join(
                f"{e['row']} "
                f"{_paired_ratio(e['train'], base['train'])['ratio_to_mha']:.2f}x"
                for e in cell if e["row"] != BASELINE
            )
            + f" ({time.perf_counter() - start:.0f}s)"
        )
    memory = []
    if args.memory_batch and backend.name != "torch":
        _log(f"{backend.name}: memory probe B={args.memory_batch} "
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


# ------------------------------------------------------------------ report


def _paired_ratio(timing, ref):
    """The ratio of a row's times to MultiHeadAttention's, as the median of
    the per-repetition ratios: the rows alternate inside every repetition,
    so each pair ran seconds apart and the machine's drift between
    repetitions cancels out. Also the 25th-75th percentile of those ratios
    and the plain ratio of medians. Timings without per-repetition times
    (or with a different count) fall back to the ratio of medians."""
    of_medians = timing["median_ms"] / ref["median_ms"]
    times, ref_times = timing.get("times_ms"), ref.get("times_ms")
    if not times or not ref_times or len(times) != len(ref_times):
        return {"ratio_to_mha": of_medians, "ratio_of_medians": of_medians}
    ratios = [t / r for t, r in zip(times, ref_times)]
    return {
        "ratio_to_mha": statistics.median(ratios),
        "ratio_p25": _percentile(ratios, 0.25),
        "ratio_p75": _percentile(ratios, 0.75),
        "ratio_of_medians": of_medians,
    }


def _ratio_cell(timing):
    """`0.83 (0.80-0.87)`: the paired ratio and its spread, where known."""
    cell = f"{timing.get('ratio_to_mha', float('nan')):.2f}"
    if "ratio_p25" in timing:
        cell += f" ({timing['ratio_p25']:.2f}-{timing['ratio_p75']:.2f})"
    return cell


def add_ratios(results):
    """Adds `ratio_to_mha` to every timing, per backend, length and mask."""
    for backend in results["backends"]:
        base = {}
        for entry in backend["rows"]:
            if entry["row"] == BASELINE:
                base[(entry["length"], entry["batch"], entry["mask"])] = entry
        for entry in backend["rows"]:
            ref = base.get((entry["length"], entry["batch"], entry["mask"]))
            for kind in ("train", "forward"):
                if ref and kind in entry and kind in ref:
                    entry[kind].update(_paired_ratio(entry[kind], ref[kind]))
        mem = {e["row"]: e["memory"] for e in backend.get("memory_probe", [])}
        ref = mem.get(BASELINE, {})
        for entry in backend.get("memory_probe", []):
            for key in ("peak_bytes", "largest_tensor_bytes"):
                if ref.get(key) and key in entry["memory"]:
                    entry["memory"][key + "_ratio_to_mha"] = (
                        entry["memory"][key] / ref[key]
                    )
    return results


def _mb(value):
    return "-" if value is None else f"{value / 2**20:.1f}"


def format_table(results):
    """Markdown tables: timings per backend, then the memory probe."""
    lines = []
    for backend in results["backends"]:
        name = backend["backend"]
        label = {"tensorflow": "TensorFlow (XLA)", "jax": "JAX (jit)",
                 "torch": "PyTorch (eager)"}.get(name, name)
        lines.append(
            f"**{label}**, {results['config']['dtype']}, width "
            f"{results['config']['width']}, {results['config']['heads']} "
            f"heads; plain matmul {backend['matmul_gflops_per_s']:.1f} "
            "GFLOP/s"
        )
        lines.append("")
        lines.append(
            "| T | B | mask | row | train ms (p25-p75) | x MHA (p25-p75) "
            "| GFLOP/s "
            "| % matmul | fwd ms | fwd x MHA | params | largest tensor MB |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for e in backend["rows"]:
            tr = e.get("train", {})
            fw = e.get("forward", {})
            lines.append(
                f"| {e['length']} | {e['batch']} | {e['mask']} | "
                f"{'MultiHeadAttention' if e['row'] == BASELINE else e['row']}"
                f" | {tr.get('median_ms', float('nan')):.1f} "
                f"({tr.get('p25_ms', float('nan')):.1f}-"
                f"{tr.get('p75_ms', float('nan')):.1f}) "
                f"| {_ratio_cell(tr)} "
                f"| {tr.get('gflops_per_s', float('nan')):.1f} "
                f"| {100 * tr.get('matmul_share', float('nan')):.0f} "
                f"| {fw.get('median_ms', float('nan')):.1f} "
                f"| {fw.get('ratio_to_mha', float('nan')):.2f} "
                f"| {e['params']:,} "
                f"| {_mb(e['memory'].get('largest_tensor_bytes'))} |"
            )
        lines.append("")
    probes = [(b["backend"], b["memory_probe"]) for b in results["backends"]
              if b.get("memory_probe")]
    if probes:
        cfg = results["config"]
        lines.append(
            f"**Memory of a training step**, batch {cfg['memory_batch']}, "
            f"length {cfg['memory_length']} (XLA buffer assignment: "
            "arguments + outputs + temporaries on JAX; largest intermediate "
            "tensor of the optimized HLO on both)"
        )
        lines.append("")
        lines.append("| backend | row | peak MB | x MHA | largest tensor MB "
                     "| x MHA |")
        lines.append("|---|---|---|---|---|---|")
        for name, probe in probes:
            for e in probe:
                m = e["memory"]
                lines.append(
                    f"| {name} | "
                    f"{'MultiHeadAttention' if e['row'] == BASELINE else e['row']}"
                    f" | {_mb(m.get('peak_bytes'))} | "
                    f"{m.get('peak_bytes_ratio_to_mha', float('nan')):.2f} | "
                    f"{_mb(m.get('largest_tensor_bytes'))} | "
                    f"{m.get('largest_tensor_bytes_ratio_to_mha', float('nan')):.2f} |"
                )
        lines.append("")
    return "\n".join(lines)


def plot(results, path):
    """Training-step time against length (first mask), one panel a backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = results["backends"]
    fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 3.6),
                             squeeze=False)
    mask = results["config"]["masks"][0]
    if len(results["config"]["lengths"]) == 1:
        # One length: training-step time relative to MultiHeadAttention,
        # one group of bars per mask.
        for ax, backend in zip(axes[0], backends):
            masks = results["config"]["masks"]
            names = [n for n in dict.fromkeys(
                e["row"] for e in backend["rows"]) if n != BASELINE]
            width = 0.8 / max(1, len(masks))
            for j, m in enumerate(masks):
                ratios = [
                    next((e["train"].get("ratio_to_mha", float("nan"))
                          for e in backend["rows"]
                          if e["row"] == n and e["mask"] == m), float("nan"))
                    for n in names
                ]
                ax.bar([i + j * width for i in range(len(names))], ratios,
                       width, label=f"mask={m}")
            ax.axhline(1.0, color="black", linewidth=1)
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
            ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
            ax.set_ylabel("training step / MultiHeadAttention")
            ax.set_title(
                f"{backend['backend']}, T={results['config']['lengths'][0]}",
                fontsize=10,
            )
            ax.grid(True, axis="y", alpha=0.3)
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=80)
        plt.close(fig)
        return
    for ax, backend in zip(axes[0], backends):
        by_row = {}
        for e in backend["rows"]:
            if e["mask"] == mask and "train" in e:
                by_row.setdefault(e["row"], []).append(
                    (e["length"], e["train"]["median_ms"])
                )
        for name, points in by_row.items():
            points.sort()
            ax.plot(
                [p[0] for p in points], [p[1] for p in points],
                marker="o", markersize=3,
                linewidth=2.2 if name == BASELINE else 1.2,
                color="black" if name == BASELINE else None,
                label="MultiHeadAttention" if name == BASELINE else name,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (batch = tokens / length)")
        ax.set_ylabel("training step, ms (median)")
        ax.set_title(f"{backend['backend']}, mask={mask}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def summarize(results, run_dir):
    """Adds ratios, writes results.json, table.md and step_time.png."""
    add_ratios(results)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = format_table(results)
    with open(os.path.join(run_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    plot(results, os.path.join(run_dir, "step_time.png"))
    return table


def config_of(args):
    return {
        "lengths": args.lengths,
        "masks": args.masks,
        "mask_lengths": args.mask_lengths or args.lengths,
        "batch": args.batch,
        "tokens": args.tokens,
        "width": args.width,
        "heads": args.heads,
        "key_dim": args.width // args.heads,
        "dtype": args.dtype,
        "variants": args.variants,
        "repetitions": args.repetitions,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "memory_batch": args.memory_batch,
        "memory_length": args.memory_length,
        "cells": [list(c) for c in cells(args)],
        "command": "python -m recipes.benchmark " + " ".join(sys.argv[1:]),
        "cpu_count": os.cpu_count(),
    }


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_args(args)
    if args.worker:
        from recipes import cli

        # TensorFlow prints its start-up lines when imported (also by the
        # JAX worker, through Keras' utilities); import it with them hidden.
        import importlib.util

        cli.import_quietly(
            ("keras",) + (("tensorflow",) if importlib.util.find_spec(
                "tensorflow") else ()))
        result = run_worker(args)
        with open(args.worker_out, "w") as f:
            json.dump(result, f)
        return 0
    run_dir = args.run_dir or os.path.join(
        "runs", "benchmark", time.strftime("%Y%m%d-%H%M%S")
    )
    os.makedirs(run_dir, exist_ok=True)
    argv = list(sys.argv[1:] if argv is None else argv)
    results = {"config": config_of(args), "backends": []}
    started = time.time()
    for backend in args.backends:
        out = os.path.join(run_dir, f"worker-{backend}.json")
        env = dict(os.environ, KERAS_BACKEND=backend)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        _log(f"starting the {backend} worker")
        code = subprocess.call(
            [sys.executable, "-m", "recipes.benchmark", *argv,
             "--worker", backend, "--worker_out", out],
            env=env,
        )
        if code != 0:
            _log(f"the {backend} worker failed (exit {code}); skipped")
            continue
        with open(out) as f:
            results["backends"].append(json.load(f))
    results["wall_seconds"] = time.time() - started
    if not results["backends"]:
        _log("no backend produced results")
        return 1
    table = summarize(results, run_dir)
    print(table)
    _log(f"results in {run_dir}/results.json, table.md, step_time.png "
         f"({results['wall_seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
