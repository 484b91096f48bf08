"""Tables and plots of `--mode train`: results.json, table.md and
step_time.png."""

import os

from recipes.benchmark import lra_speed
from recipes.benchmark import report_utils
from recipes.benchmark import stats
from recipes.benchmark.flags import BASELINE


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
                    entry[kind].update(stats.paired_ratio(entry[kind], ref[kind]))
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
        lines += report_utils.table_head(
            f"**{report_utils.backend_label(backend['backend'])}**, "
            f"{results['config']['dtype']}, width "
            f"{results['config']['width']}, {results['config']['heads']} "
            f"heads; plain matmul {backend['matmul_gflops_per_s']:.1f} "
            "GFLOP/s",
            ["T", "B", "mask", "row", "train ms (p25-p75)",
             "x MHA (p25-p75)", "GFLOP/s", "% matmul", "fwd ms", "fwd x MHA",
             "params", "largest tensor MB"],
        )
        for e in backend["rows"]:
            tr = e.get("train", {})
            fw = e.get("forward", {})
            lines.append(report_utils.table_row([
                e["length"], e["batch"], e["mask"],
                report_utils.row_label(e["row"]),
                f"{tr.get('median_ms', float('nan')):.1f} "
                f"({tr.get('p25_ms', float('nan')):.1f}-"
                f"{tr.get('p75_ms', float('nan')):.1f})",
                stats.ratio_cell(tr),
                f"{tr.get('gflops_per_s', float('nan')):.1f}",
                f"{100 * tr.get('matmul_share', float('nan')):.0f}",
                f"{fw.get('median_ms', float('nan')):.1f}",
                f"{fw.get('ratio_to_mha', float('nan')):.2f}",
                f"{e['params']:,}",
                _mb(e["memory"].get("largest_tensor_bytes")),
            ]))
        lines.append("")
    probes = [(b["backend"], b["memory_probe"]) for b in results["backends"]
              if b.get("memory_probe")]
    if probes:
        cfg = results["config"]
        lines += report_utils.table_head(
            f"**Memory of a training step**, batch {cfg['memory_batch']}, "
            f"length {cfg['memory_length']} (XLA buffer assignment: "
            "arguments + outputs + temporaries on JAX; largest intermediate "
            "tensor of the optimized HLO on both)",
            ["backend", "row", "peak MB", "x MHA", "largest tensor MB",
             "x MHA"],
        )
        for name, probe in probes:
            for e in probe:
                m = e["memory"]
                lines.append(report_utils.table_row([
                    name,
                    report_utils.row_label(e["row"]),
                    _mb(m.get("peak_bytes")),
                    f"{m.get('peak_bytes_ratio_to_mha', float('nan')):.2f}",
                    _mb(m.get("largest_tensor_bytes")),
                    f"{m.get('largest_tensor_bytes_ratio_to_mha', float('nan')):.2f}",
                ]))
        lines.append("")
    return "\n".join(lines)


def plot(results, path):
    """Training-step time against length (first mask), one panel a backend."""
    backends = results["backends"]
    plt, fig, axes = report_utils.panels(len(backends))
    mask = results["config"]["masks"][0]
    if len(results["config"]["lengths"]) == 1:
        # One length: training-step time relative to MultiHeadAttention,
        # one group of bars per mask.
        for ax, backend in zip(axes, backends):
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
        axes[-1].legend(fontsize=7)
        report_utils.save_figure(plt, fig, path)
        return
    for ax, backend in zip(axes, backends):
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
                label=report_utils.row_label(name),
            )
        report_utils.log_log_axes(
            ax, "sequence length (batch = tokens / length)",
            "training step, ms (median)",
            f"{backend['backend']}, mask={mask}",
        )
    axes[-1].legend(fontsize=7, loc="upper left")
    report_utils.save_figure(plt, fig, path)


def summarize(results, run_dir):
    """Adds ratios, writes results.json, table.md and step_time.png; with
    `--preset lra` also LRA's speed table (`lra_speed`: results.json's
    `lra_speed`, lra_speed.md, lra_speed.png), which the returned table
    ends with."""
    add_ratios(results)
    os.makedirs(run_dir, exist_ok=True)
    speed = ""
    if results["config"].get("preset") == "lra":
        speed = "\n" + lra_speed.summarize(results, run_dir)
    report_utils.write_results(results, run_dir)
    table = format_table(results)
    report_utils.write_table(table, run_dir)
    plot(results, os.path.join(run_dir, "step_time.png"))
    return table + speed
