"""What the reports of every mode share: backend labels, the head of a
markdown table, the side-by-side panels of a plot, and the files of a run."""

import json
import os

from recipes.benchmark.flags import BASELINE
from recipes.benchmark.flags import REFERENCE_LABELS

LABELS = {"tensorflow": "TensorFlow (XLA)", "jax": "JAX (jit)",
          "torch": "PyTorch (eager)",
          "torch_compile": "PyTorch (torch.compile)"}


def backend_label(name):
    return LABELS.get(name, name)


def row_label(row, names=None):
    """A row's name in tables and legends: `names`, else MultiHeadAttention
    for the baseline, a reference layer's label (`--references`), else the
    variant."""
    names = {BASELINE: "MultiHeadAttention", **REFERENCE_LABELS,
             **(names or {})}
    return names.get(row, row)


def table_row(cells):
    """One markdown table row of the formatted `cells`."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def table_head(caption, columns):
    """The caption, a blank line, the header row and the rule of a table."""
    return [caption, "", table_row(columns), "|" + "---|" * len(columns)]


def panels(count, rows=None):
    """`(plt, fig, axes)`: `count` panels side by side (Agg backend); with
    `rows`, `rows` such lines, `axes` then a `rows x count` array."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows or 1, count,
                             figsize=(5 * count, 3.6 * (rows or 1)),
                             squeeze=False)
    return plt, fig, axes[0] if rows is None else axes


def log_log_axes(ax, xlabel, ylabel, title):
    """Log-log axes (base 2 lengths), labels, title and grid of a panel."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)


def save_figure(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_results(results, run_dir):
    """Writes `results.json` into `run_dir` (created if need be)."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


def write_table(table, run_dir):
    with open(os.path.join(run_dir, "table.md"), "w") as f:
        f.write(table + "\n")
