"""The command-line flags every recipe shares, and their validators (the
model's flags: `recipes.core.model_flags`).

Pure Python: building a parser and checking its flags imports neither
Keras nor TensorFlow.
"""

import argparse
import os

from recipes.core.cluster import DEFAULT_CLUSTER_TIMEOUT
from recipes.core.compute import DISTRIBUTIONS
from recipes.core.compute import STRATEGIES
from recipes.core.devices import DEFAULT_MATMUL_PRECISION
from recipes.core.devices import MATMUL_PRECISIONS
from recipes.core.devices import PRECISIONS

# The most steps one call of the compiled step runs on a TPU by default.
TPU_STEPS_PER_EXECUTION = 32


def add_common_flags(parser, default_batch_size=32, default_epochs=3,
                     default_learning_rate=1e-3, model_dir_default=None):
    """Adds the flags every recipe shares to an `argparse.ArgumentParser`.

    `model_dir_default` is the text `--help` shows as `--model_dir`'s
    default (the recipe derives the folder from other flags).
    """
    from recipes import cli

    group = parser.add_argument_group("training (shared by all recipes)")
    group.add_argument("--model_dir", default=None,
                       help="Run directory: checkpoints (resumed when the "
                       "run is started again with the same arguments), "
                       "TensorBoard logs, results.json, vocabulary, export. "
                       "A local folder or a bucket (gs://bucket/run: any "
                       "file system tf.io.gfile knows; see "
                       "docs/cloud_storage.md)."
                       + (f" Default: {model_dir_default}."
                          if model_dir_default else ""))
    group.add_argument("--vocab_file", default=None,
                       help="WordPiece vocabulary (one token a line); "
                       "learned from the training split when not given.")
    group.add_argument("--vocab_size", type=positive_int, default=8000,
                       help="Size of the learned WordPiece vocabulary.")
    group.add_argument("--batch_size", type=positive_int,
                       default=default_batch_size,
                       help="Global batch size (split over the replicas).")
    group.add_argument("--epochs", type=positive_int,
                       default=default_epochs,
                       help="Passes over the training data.")
    group.add_argument("--learning_rate", type=positive_float,
                       default=default_learning_rate,
                       help="Peak learning rate (linear warmup, cosine "
                       "decay, AdamW).")
    group.add_argument("--warmup_fraction", type=float, default=0.1,
                       help="Linear warmup as a fraction of all training "
                       "steps.")
    group.add_argument("--weight_decay", type=float, default=0.01,
                       help="AdamW's decoupled weight decay (0: Adam).")
    group.add_argument("--ema_momentum", type=momentum, default=None,
                       help="Keep an exponential moving average of the "
                       "weights with this momentum (e.g. 0.999) and "
                       "evaluate and export it; the per-epoch log lines "
                       "show the raw weights. Off by default.")
    group.add_argument("--seed", type=int, default=0,
                       help="Random seed: initial weights, data order, "
                       "dropout.")
    group.add_argument("--strategy", choices=STRATEGIES, default="one_device",
                       help="TensorFlow backend: tf.distribute strategy: "
                       "one device, "
                       "MirroredStrategy (all local GPUs, else all logical "
                       "CPUs), MultiWorkerMirroredStrategy (from TF_CONFIG) "
                       "or TPUStrategy (--tpu).")
    group.add_argument("--cluster_timeout", type=positive_float,
                       default=DEFAULT_CLUSTER_TIMEOUT,
                       help="With --strategy=multi_worker (or several JAX "
                       "processes): seconds to wait for every worker of "
                       "TF_CONFIG (every process) to come up before "
                       "stopping with an error.")
    group.add_argument("--tpu", default=None,
                       help="TPU name or grpc:// address for --strategy=tpu "
                       "('local' for a TPU VM).")
    group.add_argument("--distribution", choices=DISTRIBUTIONS,
                       default=None,
                       help="JAX backend: keras.distribution over every "
                       "local device, DataParallel (the batch split, the "
                       "variables replicated) or ModelParallel (a (batch, "
                       "model) device mesh, the backbone's layout map). "
                       "Default: one device. On TensorFlow use --strategy.")
    group.add_argument("--model_parallel", type=positive_int, default=None,
                       help="With --distribution=model_parallel: the size "
                       "of the mesh's model axis (a divisor of the device "
                       "count; the batch axis takes the rest). Default: "
                       "every device.")
    group.add_argument("--job_addresses", default=None, metavar="HOST:PORT",
                       help="JAX backend, several processes (hosts): the "
                       "address of process 0, the coordinator (host:port, "
                       "a free port), or every process's, comma-separated "
                       "(keras.distribution.initialize). Default: "
                       "KERAS_DISTRIBUTION_JOB_ADDRESSES. Every process "
                       "runs the same command with its own --process_id.")
    group.add_argument("--num_processes", type=positive_int, default=None,
                       help="JAX backend: the number of processes of the "
                       "run. Default: KERAS_DISTRIBUTION_NUM_PROCESSES, "
                       "else 1.")
    group.add_argument("--process_id", type=int, default=None,
                       help="JAX backend: this process's index, 0 (the "
                       "coordinator and chief, which writes the run "
                       "directory) to --num_processes - 1. Default: "
                       "KERAS_DISTRIBUTION_PROCESS_ID.")
    group.add_argument("--mixed_precision", choices=PRECISIONS,
                       default="float32",
                       help="Compute dtype; float16 uses loss scaling.")
    group.add_argument("--jit_compile", action="store_true",
                       help="Compile the train step with XLA (off by "
                       "default; implies static batch shapes). Not with "
                       "--strategy=mirrored or multi_worker over several "
                       "replicas (XLA under MirroredStrategy fails on "
                       "resources of another device; Keras turns it off "
                       "there itself); XLA is implicit on TPUs.")
    group.add_argument("--steps_per_execution", type=positive_int,
                       default=None,
                       help="Training steps run by one call of the "
                       "compiled step (one host round trip); the batch "
                       "hooks of callbacks, and the time budget's check, "
                       "run once per call. Must divide the steps per "
                       "epoch. Default: with --strategy=tpu, the largest "
                       "divisor of the steps per epoch up to "
                       f"{TPU_STEPS_PER_EXECUTION}; else 1.")
    group.add_argument("--verbose", type=int, choices=(0, 1, 2), default=2,
                       help="Keras progress output: 0 none, 1 progress "
                       "bars, 2 one line per epoch.")
    cli.add_log_flag(group)
    add_device_flags(parser)
    return group


def add_device_flags(parser):
    """Adds the argument group "devices" (`--matmul_precision`) to an
    `argparse.ArgumentParser` (`add_common_flags` does)."""
    group = parser.add_argument_group("devices")
    group.add_argument("--matmul_precision", choices=MATMUL_PRECISIONS,
                       default=DEFAULT_MATMUL_PRECISION,
                       help="float32 matrix products and convolutions on "
                       "NVIDIA GPUs (Ampere and later): highest = full "
                       "float32 (TensorFloat-32 off, as on a CPU); high = "
                       "TF32 allowed (faster; inputs rounded to a 10-bit "
                       "mantissa, about 1e-3 relative). CPUs and the "
                       "bfloat16/float16 policies are unaffected. The log "
                       "line 'Devices:' shows it with the devices used.")
    return group


def add_output_switches(group, attention_plot=False):
    """Adds `--no_export` and `--no_tensorboard` (and, with
    `attention_plot`, `--no_attention_plot`) to an argument group."""
    group.add_argument("--no_export", dest="export", action="store_false",
                       help="Skip the SavedModel export (by default it is "
                       "written to <model_dir>/export).")
    if attention_plot:
        group.add_argument("--no_attention_plot", dest="attention_plot",
                           action="store_false",
                           help="Skip attention.png (by default it is "
                           "drawn).")
    group.add_argument("--no_tensorboard", dest="tensorboard",
                       action="store_false",
                       help="Skip the TensorBoard logs (by default written "
                       "to <model_dir>/logs).")


def add_time_budget_flag(group):
    """Adds `--time_budget_minutes` (see `recipes.core.timing`)."""
    group.add_argument("--time_budget_minutes", type=positive_float,
                       default=None,
                       help="Stop training after this many minutes (the "
                       "epoch in progress ends early and is saved), e.g. "
                       "to compare variants at the same budget.")


def positive_int(text):
    """`type=` of a flag that takes a positive integer
    (`recipes.cli.ArgumentParser` names the flag and the value in the
    error: "Argument `--batch_size` must be positive. Received:
    --batch_size=0")."""
    return _positive(int, "integer", text)


def comma_list(text):
    """`type=` of a flag that takes comma-separated names (no empty one)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            "must be comma-separated names, none empty")
    return names


def positive_float(text):
    """`type=` of a flag that takes a positive number (see
    `positive_int`)."""
    return _positive(float, "number", text)


def _positive(kind, noun, text):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a positive {noun}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def momentum(text):
    """`type=` of a flag in (0, 1), e.g. 0.999 (see `positive_int`)."""
    value = _positive(float, "number", text)
    if not value < 1:
        raise argparse.ArgumentTypeError("must be in (0, 1), e.g. 0.999")
    return value


for _type in (positive_int, positive_float, momentum, comma_list):
    _type.names_the_flag = True


def check_hidden_dim(hidden_dim, num_heads):
    """Raises a ValueError naming both flags unless `--hidden_dim` is a
    multiple of `--num_heads` (each head gets `hidden_dim / num_heads`
    features). The one check of the recipes; the models check their own
    arguments (`keras_synth.models.SynthesizerBackbone`)."""
    if hidden_dim % num_heads:
        raise ValueError(
            "Argument `--hidden_dim` must be a multiple of `--num_heads` "
            "(each head gets hidden_dim / num_heads features). Received: "
            f"--hidden_dim={hidden_dim}, --num_heads={num_heads}"
        )


def steps_per_execution(value, strategy, steps_per_epoch):
    """The training steps per call of the compiled step.

    Args:
        value: `--steps_per_execution` (None: the default for the device).
        strategy: `--strategy`.
        steps_per_epoch: the batches of one epoch.

    Returns:
        `value` if given, else the largest divisor of `steps_per_epoch` up
        to `TPU_STEPS_PER_EXECUTION` on a TPU (each call is a host round
        trip), else 1.

    Raises:
        ValueError: `value` is not a positive integer, or does not divide
            `steps_per_epoch` (Keras' last call of an epoch would run a
            full `value` steps, taking the next epoch's batches).
    """
    if value is not None and (isinstance(value, bool)
                              or not isinstance(value, int) or value < 1):
        raise ValueError(
            "Argument `--steps_per_execution` must be a positive integer. "
            f"Received: --steps_per_execution={value}")
    if value is None:
        if strategy != "tpu":
            return 1
        return max(d for d in range(1, TPU_STEPS_PER_EXECUTION + 1)
                   if steps_per_epoch % d == 0)
    if steps_per_epoch % value:
        raise ValueError(
            "Argument `--steps_per_execution` must divide the "
            f"{steps_per_epoch} training steps of an epoch (an epoch ends "
            f"with a call's last step). Received: --steps_per_execution="
            f"{value}")
    return value


def static_shapes(args):
    """Whether the batches get static shapes (padded to the full length):
    with `--jit_compile` (XLA compiles one program per shape) and on a
    TPU."""
    return bool(args.jit_compile or args.strategy == "tpu")


def keras_jit_compile(args):
    """`Model.compile(jit_compile=...)` of a run: `--jit_compile` on
    TensorFlow and PyTorch; always on JAX, where `jit_compile=False` runs
    each training step eagerly, op by op (measured: the built-in GLUE run
    took 1.5 s a step on 2 CPU cores that way)."""
    return bool(args.jit_compile or os.environ.get("KERAS_BACKEND") == "jax")


def bucketed_shapes(args):
    """Whether batches cut to their longest sequence are padded up to the
    next of a few lengths (`recipes.core.lengths.bucket_lengths`): on the
    JAX backend, whose `fit` compiles its step for every new shape (not
    with static shapes, `static_shapes`)."""
    return (not static_shapes(args)
            and os.environ.get("KERAS_BACKEND") == "jax")

