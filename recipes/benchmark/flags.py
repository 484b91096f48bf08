"""The command line of `python -m recipes.benchmark`: one parser, three modes.

Flag names follow the other recipes (`--model_dir`, `--num_heads`,
`--hidden_dim`, `--batch_size`); the benchmark's earlier spellings
(`--run_dir`, `--heads`, `--width`, `--batch`) stay as aliases. Flags that
only one mode reads say so in their help.
"""

import argparse
import importlib.util

from recipes import cli
from recipes.core import flags as core_flags
from recipes.core import model_flags

# `--variants`: the package's built-in variants (its registry, read as the
# recipes' `--synthesizer` reads it: `model_flags.builtin_variants`) and
# these mixtures with dot-product attention.
MIXTURES = ("random+vanilla", "dense+vanilla", "dynamic_conv+vanilla")
VARIANTS = model_flags.SYNTHESIZERS + MIXTURES
# Timed without --variants: the paper's synthesizers and two mixtures.
# `vanilla` is dot-product attention inside SynthesizerAttention: timed on
# request only, MultiHeadAttention is the baseline of every run. The
# convolutions (`light_conv`, `dynamic_conv`: keras-synth's convolution
# synthesizers, Wu et al. 2019) too.
DEFAULT_VARIANTS = ("random", "fixed_random", "factorized_random", "dense",
                    "factorized_dense", "random+vanilla", "dense+vanilla")
BASELINE = "mha"
# --references (`--mode train`): reference layers written directly with
# keras.ops (`references`), timed as rows next to MultiHeadAttention:
# Linformer (Wang et al. 2020) and Wu et al.'s (2019) LightConv and
# DynamicConv. None by default.
REFERENCES = ("linformer", "lightconv", "dynamicconv")
# The reference rows' names in tables and legends.
REFERENCE_LABELS = {"linformer": "Linformer (reference)",
                    "lightconv": "LightConv (reference)",
                    "dynamicconv": "DynamicConv (reference)"}
MASKS = ("none", "padding", "causal")
# torch_compile: PyTorch with the training step and forward pass compiled by
# torch.compile (--mode train only).
BACKENDS = ("tensorflow", "jax", "torch", "torch_compile")
# The module each backend needs, and what installs it.
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch",
                   "torch_compile": "torch"}
INSTALL = {"tensorflow": "pip install tensorflow",
           "jax": 'pip install "keras-synth[jax]"',
           "torch": "pip install torch", "torch_compile": "pip install torch"}
# Without --backends: those of these that are installed (the `recipes`
# extra installs TensorFlow; JAX comes with the `jax` extra).
DEFAULT_BACKENDS = ("tensorflow", "jax")
MODES = ("train", "generate", "context", "step")
# --preset: named configurations of the flags above; a flag given on the
# command line wins over its preset value.
# lra: Long Range Arena's speed and memory table (Tay et al. 2021): its
# byte-level text setup (width 256, 4 heads; batch 32, LRA's batch), lengths
# 1K-4K, every variant but dense+vanilla against MultiHeadAttention,
# training steps only, the memory of every (length, row) cell.
PRESETS = {
    "lra": {
        "mode": "train",
        "lengths": [1024, 2048, 3072, 4096],
        "batch_size": 32,
        "hidden_dim": 256,
        "num_heads": 4,
        "variants": ["vanilla", "dense", "factorized_dense", "random",
                     "fixed_random", "factorized_random", "random+vanilla"],
        "masks": ["none"],
        "no_forward": True,
        "memory_batch": 0,
    },
}
# Lengths when --lengths is not given: train: T = S; generate: total
# lengths (prompt + generated tokens); context: the first length tried.
DEFAULT_LENGTHS = {
    "train": [512],
    "generate": [256, 512, 1024, 2048],
    "context": [512],
    "step": [2048],
}

DESCRIPTION = """\
Speed and memory of SynthesizerAttention against MultiHeadAttention.

--mode train (default): a compiled training step and forward pass of one
  attention layer per row, rows alternating in every repetition.
--mode generate: greedy cached generation with a decoder-only model
  (embeddings, --num_layers decoder blocks, output projection), tokens/s
  against the same model with keras-hub's TransformerDecoder blocks.
--mode context: the longest sequence whose training step (one block,
  embeddings, output projection, Adam) fits --memory_budget_gib, doubling
  the length from --lengths.
--mode step: the generate mode's models taken apart: ms per cached
  decoding step against the step's position in the cache (--positions),
  a fixed part and a part per cached position.
"""


def installed(backend):
    """Whether the module that `backend` needs is installed (not imported:
    `importlib.util.find_spec`)."""
    return importlib.util.find_spec(BACKEND_MODULES[backend]) is not None


def default_backends():
    """The backends of `DEFAULT_BACKENDS` that are installed, else every
    installed backend but torch_compile (possibly none)."""
    found = [b for b in DEFAULT_BACKENDS if installed(b)]
    return found or [b for b in BACKENDS[:3] if installed(b)]


def int_list(text):
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


def choice_list(choices):
    def parse(text):
        values = [v.strip() for v in str(text).split(",") if v.strip()]
        bad = [v for v in values if v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated subset of {list(choices)}, "
                f"received {text!r}" + (
                    cli.suggestion(bad[0], choices) if bad else "")
            )
        return values

    return parse


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m recipes.benchmark",
        description=DESCRIPTION,
        formatter_class=cli.HelpFormatter,
    )
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default=None,
        help="a named configuration of these flags; flags given with it "
        "win. lra: Long Range Arena's speed table (--lengths "
        "1024,2048,3072,4096 --batch_size 32 --hidden_dim 256 --num_heads 4"
        " --variants vanilla,dense,factorized_dense,random,fixed_random,"
        "factorized_random,random+vanilla --masks none --no_forward "
        "--memory_batch 0; the memory of every cell), reported as steps/s "
        "and peak memory against MultiHeadAttention (lra_speed.md, "
        "lra_speed.png).")
    add("--mode", choices=MODES, default="train",
        help="what to measure (see above).")
    here = ",".join(default_backends()) or "none installed"
    add("--backends", type=choice_list(BACKENDS), default=None,
        help="Keras backends, run one after the other in subprocesses "
        "(default: those of tensorflow,jax that are installed, here "
        f"{here}; torch runs eagerly; torch_compile, --mode train only, "
        "compiles the steps with torch.compile). A backend that is not "
        "installed is skipped with one line.")
    add("--variants", type=choice_list(VARIANTS),
        default=list(DEFAULT_VARIANTS),
        help="synthesizer variants: the package's built-in ones and "
        f"{', '.join(MIXTURES)} (default: {','.join(DEFAULT_VARIANTS)}; the "
        "reference, MultiHeadAttention or keras-hub's TransformerDecoder, "
        "always runs).")
    add("--references", type=choice_list(REFERENCES), default=[],
        help="train: reference layers written with keras.ops (no "
        "keras-synth code), timed as rows next to MultiHeadAttention: "
        "linformer (Wang et al. 2020; --linformer_k), lightconv and "
        "dynamicconv (Wu et al. 2019, depthwise convolutions with zero "
        "padding; kernel_size and padding from --synthesizer_options). "
        "Default: none. keras-synth's light_conv and dynamic_conv "
        "synthesizers are --variants.")
    add("--linformer_k", type=int, default=256,
        help="train: Linformer's projected length k (E, F: k x n).")
    add("--synthesizer_options", default=None, metavar="JSON",
        help="train: the variants' options as a JSON object, as the "
        "recipes' flag,"
        " e.g. '{\"kernel_size\": 7}' (the convolutions' window, default 3;"
        " also the lightconv and dynamicconv references'), or per variant "
        "'{\"factorized_random\": {\"rank\": 4}}'.")
    add("--lengths", type=int_list, default=None,
        help="train: sequence lengths T = S (default 512); generate: total "
        "lengths, prompt included (default 256,512,1024,2048); context: "
        "the first length tried (default 512).")
    add("--masks", type=choice_list(MASKS), default=["none"],
        help="train: masks: none, padding (key padding, value_mask of "
        "shape (B, S), each example keeping a random 50-100%% of its "
        "keys), causal.")
    add("--mask_lengths", "--mask-lengths", type=int_list, default=None,
        help="train: lengths at which every mask of --masks is timed; other"
        " lengths time the first mask only (default: all lengths).")
    add("--batch_size", "--batch", dest="batch_size", type=int, default=None,
        help="batch size; train: default --tokens // length (at least 1); "
        "generate and context: default 8.")
    add("--tokens", type=int, default=4096,
        help="train: tokens per batch when --batch_size is not given (4096:"
        " batch 8 at length 512).")
    add("--hidden_dim", "--width", dest="hidden_dim", type=int, default=256,
        help="model width d.")
    add("--num_heads", "--heads", dest="num_heads", type=int, default=4,
        help="number of heads; key_dim = hidden_dim // num_heads.")
    add("--num_layers", type=int, default=None,
        help="generate: decoder blocks (default 4); context: blocks "
        "(default 1).")
    add("--vocabulary_size", type=int, default=256,
        help="generate and context: vocabulary (embedding and output "
        "projection).")
    add("--prompt_length", type=int, default=16,
        help="generate: prompt tokens, written to the caches in one call.")
    add("--dtype", default="float32",
        choices=("float32", "mixed_bfloat16", "mixed_float16"),
        help="dtype policy.")
    add("--positions", type=int_list, default=None,
        help="step: cache positions at which --window steps are timed "
        "(default: five, from the start to the last window).")
    add("--window", type=int, default=32,
        help="step: decoding steps timed from each position (one "
        "compiled loop).")
    add("--repetitions", type=int, default=None,
        help="timed repetitions per row; train default: as many as fit in "
        "--seconds per cell, between 3 and 15; generate default: 3; "
        "step default: 5.")
    add("--seconds", type=float, default=20.0,
        help="train: time budget of the timed repetitions of one (length, "
        "mask) cell, all rows together.")
    add("--warmup", type=int, default=2,
        help="untimed runs per row after compilation (generate: 1 at most "
        "is useful).")
    add("--memory_batch", "--memory-batch", type=int, default=32,
        help="train: batch of the peak-memory probe (0 disables it).")
    add("--memory_length", "--memory-length", type=int, default=1024,
        help="train: length of the peak-memory probe.")
    add("--memory_budget_gib", type=float, default=8.0,
        help="context: the memory budget of a training step, GiB (XLA "
        "buffer assignment on JAX).")
    add("--max_context", type=int, default=65536,
        help="context: the longest length tried.")
    add("--feedforward_chunk_size", type=int, default=4096,
        help="context: the synthesizer blocks' `feedforward_chunk_size` "
        "(tokens per rematerialised chunk of the feedforward sublayer; 0: "
        "none; keras-hub's reference block has no such option).")
    add("--no_forward", "--no-forward", action="store_true",
        help="train: time training steps only.")
    add("--model_dir", "--run_dir", "--run-dir", dest="model_dir",
        default=None,
        help="output folder; without it runs/benchmark/<time>.")
    add("--seed", type=int, default=0, help="random seed.")
    # Internal: one backend in this process, results to --worker_out.
    add("--worker", default=None, help=argparse.SUPPRESS)
    add("--worker_out", "--worker-out", default=None, help=argparse.SUPPRESS)
    return parser


def check_args(args):
    """Raises `SystemExit` naming the flag for values out of range; fills
    the mode's defaults (`--lengths`, `--batch_size`, `--num_layers`)."""
    positive = ("hidden_dim", "num_heads", "tokens", "vocabulary_size",
                "prompt_length", "max_context")
    for name in positive + ("warmup",):
        value = getattr(args, name)
        if value < (0 if name == "warmup" else 1):
            raise SystemExit(
                f"--{name} must be {'>= 0' if name == 'warmup' else 'positive'}"
                f", received {value}")
    if args.feedforward_chunk_size < 0:
        raise SystemExit("--feedforward_chunk_size must be >= 0 (0: no "
                         f"chunks), received {args.feedforward_chunk_size}")
    for name in ("batch_size", "repetitions", "num_layers"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SystemExit(f"--{name} must be positive, received {value}")
    try:
        core_flags.check_hidden_dim(args.hidden_dim, args.num_heads)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if args.memory_budget_gib <= 0:
        raise SystemExit("--memory_budget_gib must be positive, received "
                         f"{args.memory_budget_gib}")
    if args.backends is None:
        args.backends = default_backends()
        if not args.backends:
            raise SystemExit(
                "--backends: no Keras backend is installed ("
                + "; ".join(f"{b}: {INSTALL[b]}" for b in BACKENDS[:3]) + ")")
    if args.mode != "train" and "torch_compile" in args.backends:
        raise SystemExit("--backends torch_compile times --mode train only")
    if args.lengths is None:
        args.lengths = list(DEFAULT_LENGTHS[args.mode])
    check_references(args)
    if args.mode == "generate":
        short = [n for n in args.lengths if n <= args.prompt_length]
        if short:
            raise SystemExit(
                f"--lengths (total lengths) must exceed --prompt_length="
                f"{args.prompt_length}, received {short}")
    if args.mode == "step":
        if args.window < 1:
            raise SystemExit(f"--window must be positive, received "
                             f"{args.window}")
        late = [p for p in args.positions or () for n in args.lengths
                if p + args.window > n]
        if late:
            raise SystemExit(
                f"--positions must leave --window={args.window} steps before"
                f" the end of --lengths={args.lengths}, received {late}")
    if args.mode != "train":
        if args.batch_size is None:
            args.batch_size = 8
        if args.num_layers is None:
            args.num_layers = 1 if args.mode == "context" else 4
    return args


def check_references(args):
    """Raises `SystemExit` naming the flag for `--references`,
    `--linformer_k` and `--synthesizer_options` values the run cannot
    use; parses `--synthesizer_options` (JSON; its option values are
    checked by the variants in the worker)."""
    if args.linformer_k < 1:
        raise SystemExit(
            f"--linformer_k must be a positive integer (Linformer's "
            f"projected length k), received {args.linformer_k}")
    if args.references and args.mode != "train":
        raise SystemExit(
            f"--references times --mode train only, received --references="
            f"{','.join(args.references)} with --mode {args.mode}")
    if args.synthesizer_options is not None and args.mode != "train":
        raise SystemExit(
            "--synthesizer_options reaches the rows of --mode train only, "
            f"received it with --mode {args.mode}")
    if "linformer" in args.references and "causal" in args.masks:
        raise SystemExit(
            "--references linformer cannot run with --masks causal "
            "(Linformer has no causal form: each projected key mixes all "
            f"positions), received --masks={','.join(args.masks)}")
    options = argparse.Namespace(
        synthesizer="+".join(dict.fromkeys(
            name for spec in args.variants for name in spec.split("+"))),
        synthesizer_options=args.synthesizer_options)
    try:
        args.synthesizer_options = model_flags.synthesizer_options(
            options, check_values=False)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    for name, variant in (("lightconv", "light_conv"),
                          ("dynamicconv", "dynamic_conv")):
        if name not in args.references:
            continue
        kernel_size, padding = conv_options(args, variant)
        if (isinstance(kernel_size, bool) or not isinstance(kernel_size, int)
                or kernel_size < 1):
            raise SystemExit(
                f"--synthesizer_options: the {name} reference's kernel_size "
                "must be a positive integer, received "
                f"kernel_size={kernel_size!r}")
        if padding not in ("centered", "causal"):
            raise SystemExit(
                f"--synthesizer_options: the {name} reference's padding must"
                " be one of 'centered', 'causal', received "
                f"padding={padding!r}")


def conv_options(args, variant):
    """`(kernel_size, padding)` of a convolution reference: the options of
    `--synthesizer_options` that keras-synth's `variant` (light_conv or
    dynamic_conv) would take (flat, then its own), else 3 and
    "centered"."""
    options = args.synthesizer_options or {}
    own = options.get(variant) or {}
    return (own.get("kernel_size", options.get("kernel_size", 3)),
            own.get("padding", options.get("padding", "centered")))


def parse_with_preset(parser, argv=None):
    """`parser.parse_args(argv)`, the values of `--preset` as defaults:
    flags given on the command line win over the preset's."""
    first, _ = parser.parse_known_args(argv)
    if first.preset:
        parser.set_defaults(**PRESETS[first.preset])
    return parser.parse_args(argv)


def parse(argv=None):
    """Parses and checks a command line (`SystemExit` on bad flags)."""
    return check_args(parse_with_preset(build_parser(), argv))
