"""Speed and memory benchmark: Synthesizers against MultiHeadAttention.

`python -m recipes.benchmark` measures, per backend in a subprocess of its
own (`runner`), one of four things (`--mode`, `flags`):

- `train` (default, `training`, `training_backends`, `training_report`): a
  compiled training step and forward pass of one attention layer per row
  against `keras.layers.MultiHeadAttention`, paired; with `--references`
  also reference layers written with `keras.ops` (`references`: Linformer,
  LightConv, DynamicConv);
- `generate` (`generation`, `report`): tokens/s of greedy cached
  generation against the same model with keras-hub's `TransformerDecoder`
  blocks, and cache bytes per token;
- `context` (`context`, `report`): the longest sequence whose training
  step fits a memory budget (XLA's buffer assignment, JAX);
- `step` (`step_profile`): the generate mode's models taken apart: ms per
  cached decoding step against its position in the cache, split into a
  fixed part and a part per cached position.

`--preset lra` (`flags.PRESETS`, `lra_speed`) sets the train mode's flags
to Long Range Arena's speed table and adds its report: steps/s and memory
against MultiHeadAttention at lengths 1K-4K.

Output, in `--model_dir` (default `runs/benchmark/<timestamp>`):
`results.json`, `table.md` (also printed) and a plot (`step_time.png`,
`tokens_per_s.png`; with `--preset lra` also `lra_speed.md` and
`lra_speed.png`).

Examples (2 CPU cores):

    python -m recipes.benchmark --lengths 512 --masks none,padding,causal
    python -m recipes.benchmark --mode generate --lengths 256,512,1024,2048
    python -m recipes.benchmark --mode context --backends jax
    python -m recipes.benchmark --mode step --lengths 2048
    python -m recipes.benchmark --preset lra --backends jax
    python -m recipes.benchmark --variants light_conv,dynamic_conv \
        --references linformer,lightconv,dynamicconv
"""

from recipes.benchmark.flags import build_parser
from recipes.benchmark.runner import main
from recipes.registry import Recipe

RECIPE = Recipe(
    name="benchmark",
    description="speed and memory against MultiHeadAttention")

__all__ = ["build_parser", "main"]
