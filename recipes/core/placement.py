"""The one place that picks where a recipe computes, per Keras backend:
a `tf.distribute.Strategy` (`--strategy`, `--tpu`) on TensorFlow, Keras'
own placement or `keras.distribution` (`--distribution`,
`--model_parallel`) on JAX, Keras' own placement on PyTorch.
"""

from recipes.core import processes
from recipes.core.cluster import DEFAULT_CLUSTER_TIMEOUT
from recipes.core.distribution import backend_strategy
from recipes.core.strategies import select_strategy

# The Keras backends the recipes train on.
BACKENDS = ("tensorflow", "jax", "torch")


def check_placement(args, backend):
    """Refuses flags of another backend's distribution engine.

    `--strategy` other than `one_device` and `--tpu` are tf.distribute's
    (TensorFlow backend); `--distribution` and `--model_parallel` are
    `keras.distribution`'s (JAX backend). Pure Python: `run_main` checks
    it before Keras is imported.

    Raises:
        ValueError: naming the flag, the backend it needs and this one.
    """
    strategy = getattr(args, "strategy", "one_device")
    tpu = getattr(args, "tpu", None)
    distribution = getattr(args, "distribution", None)
    model_parallel = getattr(args, "model_parallel", None)
    if backend != "tensorflow" and (strategy != "one_device" or tpu):
        flag = (f"--strategy={strategy}" if strategy != "one_device"
                else f"--tpu={tpu}")
        hint = ("--distribution=data_parallel or model_parallel "
                "(keras.distribution)" if backend == "jax"
                else "one device (no --strategy)")
        raise ValueError(
            f"Argument `{flag}` is a tf.distribute strategy of the "
            f"TensorFlow backend, but KERAS_BACKEND={backend!r}. Run it "
            f"with KERAS_BACKEND=tensorflow, or on {backend} use {hint}.")
    if backend != "jax" and (distribution or model_parallel is not None):
        flag = (f"--distribution={distribution}" if distribution
                else f"--model_parallel={model_parallel}")
        hint = ("--strategy=mirrored, multi_worker or tpu (tf.distribute)"
                if backend == "tensorflow" else "one device")
        raise ValueError(
            f"Argument `{flag}` is keras.distribution on the JAX backend, "
            f"but KERAS_BACKEND={backend!r}. Run it with KERAS_BACKEND=jax, "
            f"or on {backend} use {hint}.")
    settings = processes.process_settings(args)
    if backend != "jax" and settings is not None:
        flag = next((f"--{key}" for key in processes.ENVIRONMENT
                     if getattr(args, key, None) is not None),
                    "KERAS_DISTRIBUTION_*")
        hint = ("--strategy=multi_worker with TF_CONFIG (tf.distribute)"
                if backend == "tensorflow" else "one process")
        raise ValueError(
            f"Argument `{flag}` sets several JAX processes "
            f"(keras.distribution.initialize), but KERAS_BACKEND="
            f"{backend!r}. Run it with KERAS_BACKEND=jax, or on {backend} "
            f"use {hint}.")
    if model_parallel is not None and distribution != "model_parallel":
        raise ValueError(
            "Argument `--model_parallel` needs "
            "`--distribution=model_parallel`. Received: "
            f"--distribution={distribution}, "
            f"--model_parallel={model_parallel}")


def select(args, backend, layout_map=None, log=print):
    """Returns what the recipe builds and trains under: the
    `tf.distribute.Strategy` of `--strategy` on TensorFlow, else a
    `distribution.BackendStrategy` (one device, or on JAX the
    `keras.distribution` of `--distribution`).

    Call it first, before the backend runs any op (multi-worker and TPU
    strategies, JAX's devices).

    Args:
        args: the parsed flags (`strategy`, `tpu`, `cluster_timeout`,
            `distribution`, `model_parallel`; missing ones take their
            defaults).
        backend: the Keras backend, one of `BACKENDS`.
        layout_map: `(device_mesh) -> keras.distribution.LayoutMap` for
            `--distribution=model_parallel` (default: the layouts of
            keras-synth's backbones, `get_layout_map`).
        log: a `print`-like function.

    On JAX, several processes (`--job_addresses`, `--num_processes`,
    `--process_id` or `KERAS_DISTRIBUTION_*`) are joined first; they train
    with `--distribution` (default `data_parallel`) over all their devices.
    """
    check_placement(args, backend)
    if backend == "tensorflow":
        return select_strategy(
            args.strategy, args.tpu,
            getattr(args, "cluster_timeout", DEFAULT_CLUSTER_TIMEOUT))
    distribution = getattr(args, "distribution", None)
    settings = processes.process_settings(args)
    if settings is not None:
        processes.initialize(
            settings, getattr(args, "cluster_timeout",
                              DEFAULT_CLUSTER_TIMEOUT), log)
        if distribution is None:
            distribution = "data_parallel"
            log("Distribution: data_parallel over the devices of every "
                "process (several processes; --distribution chooses).")
    if layout_map is None and backend == "jax":
        from keras_synth.models import SynthesizerBackbone

        layout_map = SynthesizerBackbone.get_layout_map
    return backend_strategy(distribution,
                            getattr(args, "model_parallel", None),
                            layout_map, backend)
