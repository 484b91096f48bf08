"""Tables and plots of `--mode generate` and `--mode context`.

generate: `table.md` (tokens/s, paired ratio to keras-hub's
`TransformerDecoder`, cache bytes) and `tokens_per_s.png` (tokens/s against
total length, one line per row, one panel per backend). context:
`table.md` (the longest length that fits, what limits the next one, the
memory per probed length).
"""

import os

from recipes.benchmark import generation
from recipes.benchmark import report_utils
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.flags import VARIANTS


def _name(row):
    return report_utils.row_label(
        row, {generation.REFERENCE: "keras-hub TransformerDecoder"})


def _kib(value):
    return f"{value / 1024:.1f}"


def generation_table(results):
    config = results["config"]
    lines = []
    for backend in results["backends"]:
        lines += report_utils.table_head(
            f"**{report_utils.backend_label(backend['backend'])}**, "
            f"{config['dtype']}, width {config['hidden_dim']}, "
            f"{config['num_heads']} heads, {config['num_layers']} layers, "
            f"batch {config['batch_size']}, prompt "
            f"{config['prompt_length']}, greedy",
            ["total length", "row", "tokens/s", "x reference (p25-p75)",
             "ms", "cache KiB/token", "cache KiB read/step"],
        )
        for r in backend["rows"]:
            spread = ""
            if r.get("tokens_per_s_ratio_p25") is not None:
                spread = (f" ({r['tokens_per_s_ratio_p25']:.2f}-"
                          f"{r['tokens_per_s_ratio_p75']:.2f})")
            lines.append(report_utils.table_row([
                r["total_length"], _name(r["row"]),
                f"{r['tokens_per_s']:.0f}",
                f"{r['tokens_per_s_ratio']:.2f}{spread}",
                f"{r['median_ms']:.0f}",
                _kib(r["cache_bytes_per_token"]),
                _kib(r["cache_bytes_read_per_step"]),
            ]))
        lines.append("")
    return "\n".join(lines)


def plot_generation(results, path):
    backends = results["backends"]
    plt, fig, axes = report_utils.panels(len(backends))
    for ax, backend in zip(axes, backends):
        by_row = {}
        for r in backend["rows"]:
            by_row.setdefault(r["row"], []).append(
                (r["total_length"], r["tokens_per_s"]))
        for row, points in by_row.items():
            points.sort()
            reference = row == generation.REFERENCE
            # One color per variant in every panel.
            color = ("black" if reference
                     else f"C{VARIANTS.index(row) % 10}")
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    marker="o", markersize=3,
                    linewidth=2.2 if reference else 1.2,
                    color=color, label=_name(row))
        report_utils.log_log_axes(
            ax, "total length (prompt + generated tokens)",
            "generated tokens/s (batch)",
            report_utils.backend_label(backend["backend"]),
        )
        ax.legend(fontsize=6)
    report_utils.save_figure(plt, fig, path)


def context_table(results):
    config = results["config"]
    lines = []
    for backend in results["backends"]:
        lines += report_utils.table_head(
            f"**Longest trainable context**, {backend['backend']}: "
            f"{backend['budget_bytes'] / 2**30:g} GiB budget (XLA buffer "
            f"assignment), batch {config['batch_size']}, width "
            f"{config['hidden_dim']}, {config['num_heads']} heads, "
            f"{config['num_layers']} block(s), vocabulary "
            f"{config['vocabulary_size']}, Adam",
            ["row", "longest length", "x MultiHeadAttention",
             "next length limited by", "GiB per length (parameters + Adam)"],
        )
        base = next((r["longest_length"] for r in backend["rows"]
                     if r["row"] == BASELINE), None)
        for r in backend["rows"]:
            longest = r["longest_length"]
            ratio = (f"{longest / base:g}" if longest and base else "-")
            probes = ", ".join(
                f"{p['length']}: {p.get('peak_bytes', 0) / 2**30:.2f} "
                f"({p['state_bytes'] / 2**30:.2f})" for p in r["probes"])
            lines.append(report_utils.table_row([
                _name(r["row"]), longest or "-", ratio, r["limit"] or "-",
                probes,
            ]))
        lines.append("")
    return "\n".join(lines)


def summarize(results, run_dir):
    """Writes results.json, table.md (and tokens_per_s.png); returns the
    table."""
    report_utils.write_results(results, run_dir)
    mode = results["config"]["mode"]
    if mode == "generate":
        table = generation_table(results)
        plot_generation(results, os.path.join(run_dir, "tokens_per_s.png"))
    else:
        table = context_table(results)
    report_utils.write_table(table, run_dir)
    return table
