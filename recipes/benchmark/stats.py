"""Statistics and helpers shared by the benchmark's modes: paired ratios,
percentiles, log lines, and the largest tensor of an HLO module."""

import math
import re
import statistics
import sys
import time


def log(message):
    print(f"[benchmark {time.strftime('%H:%M:%S')}] {message}",
          file=sys.stderr, flush=True)


def median_seconds(fn, repetitions, warmup=1):
    """The median wall time of `repetitions` calls of `fn`, after `warmup`
    untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def percentile(values, q):
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    pos = (len(values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def paired_ratio(timing, ref):
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
        "ratio_p25": percentile(ratios, 0.25),
        "ratio_p75": percentile(ratios, 0.75),
        "ratio_of_medians": of_medians,
    }


def ratio_cell(timing):
    """`0.83 (0.80-0.87)`: the paired ratio and its spread, where known."""
    cell = f"{timing.get('ratio_to_mha', float('nan')):.2f}"
    if "ratio_p25" in timing:
        cell += f" ({timing['ratio_p25']:.2f}-{timing['ratio_p75']:.2f})"
    return cell


def largest_hlo_tensor(hlo_text):
    """Bytes of the largest array shape named in an HLO module's text."""
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

