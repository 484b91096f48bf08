"""Tables and plots of `--mode generate` and `--mode context`.

generate: `table.md` (tokens/s, paired ratio to keras-hub's
`TransformerDecoder`, cache bytes) and `tokens_per_s.png` (tokens/s against
total length, one line per row, one panel per backend). context:
`table.md` (the longest length that fits, what limits the next one, the
memory per probed length).
"""

import json
import os

from recipes.benchmark import generation
from recipes.benchmark.flags import BASELINE
from recipes.benchmark.flags import VARIANTS

LABELS = {"tensorflow": "TensorFlow (XLA)", "jax": "JAX (jit)",
          "torch": "PyTorch (eager)"}


def _name(row):
    return {generation.REFERENCE: "keras-hub TransformerDecoder",
            BASELINE: "MultiHeadAttention"}.get(row, row)


def _kib(value):
    return f"{value / 1024:.1f}"


def generation_table(results):
    config = results["config"]
    lines = []
    for backend in results["backends"]:
        lines += [
            f"**{LABELS.get(backend['backend'], backend['backend'])}**, "
            f"{config['dtype']}, width {config['hidden_dim']}, "
            f"{config['num_heads']} heads, {config['num_layers']} layers, "
            f"batch {config['batch_size']}, prompt "
            f"{config['prompt_length']}, greedy",
            "",
            "| total length | row | tokens/s | x reference (p25-p75) "
            "| ms | cache KiB/token | cache KiB read/step |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in backend["rows"]:
            spread = ""
            if r.get("tokens_per_s_ratio_p25") is not None:
                spread = (f" ({r['tokens_per_s_ratio_p25']:.2f}-"
                          f"{r['tokens_per_s_ratio_p75']:.2f})")
            lines.append(
                f"| {r['total_length']} | {_name(r['row'])} "
                f"| {r['tokens_per_s']:.0f} "
                f"| {r['tokens_per_s_ratio']:.2f}{spread} "
                f"| {r['median_ms']:.0f} "
                f"| {_kib(r['cache_bytes_per_token'])} "
                f"| {_kib(r['cache_bytes_read_per_step'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot_generation(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = results["backends"]
    fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 3.6),
                             squeeze=False)
    for ax, backend in zip(axes[0], backends):
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
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("total length (prompt + generated tokens)")
        ax.set_ylabel("generated tokens/s (batch)")
        ax.set_title(LABELS.get(backend["backend"], backend["backend"]),
                     fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def context_table(results):
    config = results["config"]
    lines = []
    for backend in results["backends"]:
        lines += [
            f"**Longest trainable context**, {backend['backend']}: "
            f"{backend['budget_bytes'] / 2**30:g} GiB budget (XLA buffer "
            f"assignment), batch {config['batch_size']}, width "
            f"{config['hidden_dim']}, {config['num_heads']} heads, "
            f"{config['num_layers']} block(s), vocabulary "
            f"{config['vocabulary_size']}, Adam",
            "",
            "| row | longest length | x MultiHeadAttention | next length "
            "limited by | GiB per length (parameters + Adam) |",
            "|---|---|---|---|---|",
        ]
        base = next((r["longest_length"] for r in backend["rows"]
                     if r["row"] == BASELINE), None)
        for r in backend["rows"]:
            longest = r["longest_length"]
            ratio = (f"{longest / base:g}" if longest and base else "-")
            probes = ", ".join(
                f"{p['length']}: {p.get('peak_bytes', 0) / 2**30:.2f} "
                f"({p['state_bytes'] / 2**30:.2f})" for p in r["probes"])
            lines.append(
                f"| {_name(r['row'])} | {longest or '-'} | {ratio} "
                f"| {r['limit'] or '-'} | {probes} |")
        lines.append("")
    return "\n".join(lines)


def summarize(results, run_dir):
    """Writes results.json, table.md (and tokens_per_s.png); returns the
    table."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    mode = results["config"]["mode"]
    if mode == "generate":
        table = generation_table(results)
        plot_generation(results, os.path.join(run_dir, "tokens_per_s.png"))
    else:
        table = context_table(results)
    with open(os.path.join(run_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    return table
