"""`--preset lra`: the training rows as Long Range Arena's speed table.

LRA (Tay et al. 2021) reports, per model and sequence length, training
steps per second and peak memory relative to the Transformer's. From the
rows of `--mode train` (one attention layer per row, its training step:
forward, backward and Adam) this module makes, per backend, length and row:
`steps_per_s` (1000 / the median ms of a step), `steps_per_s_ratio_to_mha`
(the inverse of the paired ratio of step times, `stats.paired_ratio`) and
the memory of the step against MultiHeadAttention's at the same batch and
length. What the memory is depends on the backend (`MEMORY_MEASURES`):
JAX gives XLA's buffer assignment of the compiled step (arguments + outputs
+ temporaries, less aliased buffers: `peak_bytes`); TensorFlow only the
largest intermediate tensor of the optimized HLO (no peak: its CPU
allocator keeps no statistics); PyTorch nothing.

Output: the `lra_speed` list of `results.json`, `lra_speed.md` and
`lra_speed.png` (the two ratios against length, one pair of panels per
backend).
"""

import os

from recipes.benchmark import report_utils
from recipes.benchmark.flags import BASELINE

# What the memory columns of each backend are.
MEMORY_MEASURES = {
    "jax": "peak: XLA buffer assignment of the compiled training step "
           "(arguments + outputs + temporaries - aliased)",
    "tensorflow": "largest intermediate tensor of the compiled (XLA) "
                  "training step; peak not measured",
    "torch": "not measured",
    "torch_compile": "not measured",
}
MEMORY_KEYS = ("peak_bytes", "largest_tensor_bytes")
MEMORY_TITLES = {"peak_bytes": "peak (XLA buffer assignment)",
                 "largest_tensor_bytes": "largest tensor"}


def memory_key(backend):
    """The memory figure the table shows for `backend`, or None."""
    return {"jax": "peak_bytes",
            "tensorflow": "largest_tensor_bytes"}.get(backend)


def speed_entries(results):
    """One dict per (backend, length, row) of the first mask's cells, the
    ratios against MultiHeadAttention's cell of the same backend, length
    and batch. Needs `training_report.add_ratios` done."""
    entries = []
    for backend in results["backends"]:
        name = backend["backend"]
        cells = [e for e in backend["rows"]
                 if e["mask"] == results["config"]["masks"][0]
                 and "train" in e]
        base = {(e["length"], e["batch"]): e for e in cells
                if e["row"] == BASELINE}
        for e in cells:
            ref = base[e["length"], e["batch"]]
            train = e["train"]
            entry = {
                "backend": name, "row": e["row"], "length": e["length"],
                "batch": e["batch"], "width": e["width"],
                "heads": e["heads"], "dtype": e["dtype"],
                "repetitions": train["repetitions"],
                "steps_per_s": 1e3 / train["median_ms"],
                "steps_per_s_ratio_to_mha": 1.0 / train["ratio_to_mha"],
                "memory_measure": MEMORY_MEASURES.get(name, "not measured"),
            }
            for key in MEMORY_KEYS:
                value = e["memory"].get(key)
                entry[key] = value
                reference = ref["memory"].get(key)
                entry[key + "_ratio_to_mha"] = (
                    value / reference if value and reference else None)
            entries.append(entry)
    return entries


def _ratio(value):
    return "-" if value is None else f"{value:.2f}"


def format_speed_table(results):
    """Markdown: per backend, a row per variant, per length steps/s and
    memory with their ratios to MultiHeadAttention."""
    config = results["config"]
    lines = []
    for name in dict.fromkeys(e["backend"] for e in results["lra_speed"]):
        entries = [e for e in results["lra_speed"] if e["backend"] == name]
        lengths = sorted({e["length"] for e in entries})
        key = memory_key(name)
        memory_head = {"peak_bytes": "peak MB",
                       "largest_tensor_bytes": "largest tensor MB"}.get(key)
        columns = ["row"]
        for length in lengths:
            columns.append(f"{length}: steps/s (x MHA)")
            if memory_head:
                columns.append(f"{length}: {memory_head} (x MHA)")
        lines += report_utils.table_head(
            f"**LRA speed table, {report_utils.backend_label(name)}**: "
            f"training steps/s of one attention layer (forward, backward, "
            f"Adam), {config['dtype']}, batch {entries[0]['batch']}, width "
            f"{config['hidden_dim']}, {config['num_heads']} heads; memory: "
            f"{MEMORY_MEASURES.get(name, 'not measured')}",
            columns)
        by = {(e["row"], e["length"]): e for e in entries}
        for row in dict.fromkeys(e["row"] for e in entries):
            cells = [report_utils.row_label(row)]
            for length in lengths:
                e = by.get((row, length))
                if e is None:
                    cells += ["-"] * (2 if memory_head else 1)
                    continue
                cells.append(f"{e['steps_per_s']:.2f} "
                             f"({_ratio(e['steps_per_s_ratio_to_mha'])})")
                if memory_head:
                    value = e[key]
                    cells.append(
                        "-" if value is None else
                        f"{value / 2**20:.1f} "
                        f"({_ratio(e[key + '_ratio_to_mha'])})")
            lines.append(report_utils.table_row(cells))
        lines.append("")
    return "\n".join(lines)


def plot_speed(results, path):
    """Steps/s and memory relative to MultiHeadAttention against length: a
    line of two panels per backend (the memory panel says where memory is
    not measured)."""
    names = list(dict.fromkeys(e["backend"] for e in results["lra_speed"]))
    plt, fig, axes = report_utils.panels(2, rows=len(names))
    for (speed_ax, memory_ax), name in zip(axes, names):
        entries = [e for e in results["lra_speed"] if e["backend"] == name]
        key = memory_key(name)
        label = report_utils.backend_label(name)
        for ax, field, ylabel, title in (
                (speed_ax, "steps_per_s_ratio_to_mha",
                 "training steps/s / MultiHeadAttention", label),
                (memory_ax, f"{key}_ratio_to_mha",
                 "memory / MultiHeadAttention",
                 f"{label}: " + MEMORY_TITLES.get(key,
                                                  "memory not measured"))):
            for row in dict.fromkeys(e["row"] for e in entries):
                points = sorted((e["length"], e.get(field)) for e in entries
                                if e["row"] == row
                                and e.get(field) is not None)
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points],
                            marker="o", markersize=3,
                            linewidth=2.2 if row == BASELINE else 1.2,
                            color="black" if row == BASELINE else None,
                            label=report_utils.row_label(row))
            ax.set_xscale("log", base=2)
            lengths = sorted({e["length"] for e in entries})
            ax.set_xticks(lengths, [str(n) for n in lengths])
            ax.minorticks_off()
            ax.set_xlabel("sequence length")
            ax.set_ylabel(ylabel, fontsize=8)
            ax.set_title(title, fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
        speed_ax.legend(fontsize=6)
    report_utils.save_figure(plt, fig, path)


def summarize(results, run_dir):
    """Adds `results["lra_speed"]`; writes lra_speed.md and lra_speed.png;
    returns the table (results.json is written by the caller)."""
    results["lra_speed"] = speed_entries(results)
    table = format_speed_table(results)
    with open(os.path.join(run_dir, "lra_speed.md"), "w") as f:
        f.write(table + "\n")
    plot_speed(results, os.path.join(run_dir, "lra_speed.png"))
    return table
