"""The one place that picks where a recipe computes, per Keras backend
(`select`): a `tf.distribute.Strategy` on TensorFlow (`--strategy`,
`--tpu`, `select_strategy`), Keras' own placement or `keras.distribution`
on JAX (`--distribution`, `--model_parallel`, several processes), Keras'
own placement on PyTorch (`BackendStrategy`, the stand-in for a strategy).
"""

import contextlib

from recipes.core import cluster
from recipes.core import devices

# The Keras backends the recipes train on.
BACKENDS = ("tensorflow", "jax", "torch")
STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")
# `--distribution`: how JAX spreads a run over the local devices.
# `data_parallel`: `keras.distribution.DataParallel`, the batch split over
# every device, the variables replicated; `model_parallel`:
# `keras.distribution.ModelParallel` over a (batch, model) `DeviceMesh`,
# the variables laid out by the backbone's `get_layout_map`.
DISTRIBUTIONS = ("data_parallel", "model_parallel")


def select(args, backend, layout_map=None, log=print):
    """Returns what the recipe builds and trains under on `backend`: the
    `tf.distribute.Strategy` of `--strategy` on TensorFlow, else a
    `BackendStrategy` (one device, or on JAX the `keras.distribution` of
    `--distribution`, laid out by `layout_map`, default the backbones'
    `get_layout_map`). Call it first, before the backend runs any op, with
    the flags checked (`runtime.setup` does both); a missing flag takes
    its default.

    On JAX, several processes (`--job_addresses`, `--num_processes`,
    `--process_id` or `KERAS_DISTRIBUTION_*`) are joined first; they train
    with `--distribution` (default `data_parallel`) over all their devices.
    """
    timeout = getattr(args, "cluster_timeout", cluster.DEFAULT_CLUSTER_TIMEOUT)
    if backend == "tensorflow":
        return select_strategy(args.strategy, args.tpu, timeout)
    distribution = getattr(args, "distribution", None)
    settings = cluster.process_settings(args)
    if settings is not None:
        cluster.join_processes(settings, timeout, log)
        if distribution is None:
            distribution = "data_parallel"
            log("Distribution: data_parallel over the devices of every "
                "process (several processes; --distribution chooses).")
    import tensorflow as tf

    try:  # TensorFlow (tf.data) off the GPUs: it would take their memory
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # pragma: no cover - TensorFlow already started
        pass
    names, models = devices.local_devices(backend)
    if distribution is None:
        return BackendStrategy(None, names[:1], models)
    import keras

    if layout_map is None:
        from keras_synth.models import SynthesizerBackbone

        layout_map = SynthesizerBackbone.get_layout_map
    chosen = keras_distribution(distribution,
                                getattr(args, "model_parallel", None),
                                layout_map)
    # Global: Keras' JAX trainer splits the batches of `fit`, `evaluate`
    # and `predict` by the distribution set, not by the scope entered.
    keras.distribution.set_distribution(chosen)
    return BackendStrategy(chosen, names, models)


def select_strategy(name, tpu=None,
                    cluster_timeout=cluster.DEFAULT_CLUSTER_TIMEOUT):
    """Returns the `tf.distribute.Strategy` called `name`. Call it first,
    before TensorFlow runs any op: `MultiWorkerMirroredStrategy` configures
    the collective ops at start-up, and the TPU system is initialised.

    - `one_device`: the first GPU, else the CPU.
    - `mirrored`: `MirroredStrategy` over all local GPUs, or over all logical
      CPU devices when there is no GPU (useful to test distribution).
    - `multi_worker`: `MultiWorkerMirroredStrategy`, cluster from `TF_CONFIG`
      (checked first); the process ends with an error if the cluster is
      not up within `cluster_timeout` seconds.
    - `tpu`: `TPUStrategy` on the TPU named by `tpu`.

    `KERAS_SYNTH_LOGICAL_DEVICES=N` first splits the first GPU (or the
    CPU) into `N` logical devices (`devices.split_logical_devices`).
    """
    import tensorflow as tf

    devices.check_choice(name, STRATEGIES, "strategy", "strategy")
    if name != "tpu" and tpu:
        raise ValueError(
            f"Argument `--tpu={tpu}` needs `--strategy=tpu`. Received: "
            f"--strategy={name}")
    if name == "multi_worker":
        with cluster.tf_cluster(cluster_timeout):
            return _multi_worker_strategy()
    devices.split_logical_devices()
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if name == "mirrored":
        if gpus:
            return tf.distribute.MirroredStrategy(gpus)
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            cpus, cross_device_ops=tf.distribute.ReductionToOneDevice())
    if not tpu:
        raise ValueError(
            "Argument `--tpu` is required by `--strategy=tpu`: the TPU name, "
            "a grpc:// address, or 'local' on a TPU VM.")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _multi_worker_strategy():
    import tensorflow as tf

    class MultiWorkerMirroredStrategy(
            tf.distribute.MultiWorkerMirroredStrategy):
        """`tf.distribute.MultiWorkerMirroredStrategy` whose `reduce` takes
        the nested values and scalars Keras 3's `fit` gives it.

        Keras' TensorFlow trainer reduces a batch `(x, y)` in one call and
        each scalar metric with `axis=0`; TensorFlow's multi-worker
        `reduce` takes neither (one tensor, and an axis the value has).
        Here each tensor of the structure is reduced, a scalar with
        `axis=None` (the mean or sum over replicas that was meant).
        """

        def reduce(self, reduce_op, value, axis):
            def reduce_one(v):
                local = v.values[0] if isinstance(
                    v, tf.distribute.DistributedValues) else v
                rank = getattr(getattr(local, "shape", None), "rank", None)
                return super(MultiWorkerMirroredStrategy, self).reduce(
                    reduce_op, v, None if rank == 0 else axis)

            return tf.nest.map_structure(reduce_one, value)

    return MultiWorkerMirroredStrategy()


def check_jit_compile(jit_compile, strategy, num_replicas):
    """Refuses `--jit_compile` with `--strategy=mirrored` or
    `multi_worker` over more than one replica.

    XLA-compiling a `MirroredStrategy` train step is a known failure mode
    of Keras on several GPUs (the compiled step is handed resources placed
    on another device); Keras' own `jit_compile="auto"` turns XLA off
    under tf.distribute for that reason. One replica (`one_device`, or
    `mirrored` on one GPU) is compiled; on a TPU XLA is implicit.

    Raises:
        ValueError: naming both flags, the replicas and what to do.
    """
    if (jit_compile and strategy in ("mirrored", "multi_worker")
            and num_replicas > 1):
        raise ValueError(
            f"Argument `--jit_compile` is not supported with "
            f"`--strategy={strategy}` over {num_replicas} replicas: an "
            "XLA-compiled MirroredStrategy train step fails on resources "
            "placed on another device (Keras' own jit_compile='auto' turns "
            "XLA off under tf.distribute). Drop --jit_compile, or compile "
            "on one device (--strategy=one_device); on a TPU "
            "(--strategy=tpu) XLA is implicit.")


class BackendStrategy:
    """The stand-in for a `tf.distribute.Strategy` on JAX and PyTorch: the
    recipes build their model under `scope()` and read
    `num_replicas_in_sync`. Keras' own placement (`distribution` None), or
    on JAX a `keras.distribution.Distribution`, whose scope gives the
    variables their layouts; `devices` (`"GPU:0"`, ...) and
    `device_models` (`{"GPU:i": model name}`) are for the log."""

    def __init__(self, distribution=None, devices=("CPU:0",),
                 device_models=None):
        self.distribution = distribution
        self.worker_devices = tuple(devices)
        self.device_models = dict(device_models or {})

    @property
    def num_replicas_in_sync(self):
        """The data-parallel replicas: the size of the mesh's batch axis
        (1 without a distribution)."""
        if self.distribution is None:
            return 1
        mesh = self.distribution.device_mesh
        axis = getattr(self.distribution, "batch_dim_name",
                       mesh.axis_names[0])
        return int(mesh.shape[mesh.axis_names.index(axis)])

    def scope(self):
        """The distribution's scope, or a no-op context without one (the
        distribution is also Keras' global one: `fit` splits the batches
        by it)."""
        if self.distribution is None:
            return contextlib.nullcontext()
        return self.distribution.scope()

    def __repr__(self):
        kind = (type(self.distribution).__name__ if self.distribution
                else "one device")
        return f"BackendStrategy({kind}, {len(self.worker_devices)} device(s))"


def keras_distribution(name, model_parallel=None, layout_map=None):
    """The `keras.distribution.Distribution` of `--distribution=name`
    (one of `DISTRIBUTIONS`) over every local JAX device. `model_parallel`
    is the size of a `ModelParallel` mesh's `model` axis (a divisor of the
    devices; default all), `layout_map` `(device_mesh) -> LayoutMap` its
    variables' layouts.

    Raises:
        ValueError: naming `--model_parallel`, for a size that does not
            divide the devices, or a run of several processes.
    """
    import keras

    devices = keras.distribution.list_devices()
    # Several processes: each reads its share of every batch itself
    # (`workers.local_batches`), which Keras' sharding of a tf.data
    # pipeline cannot do for every recipe's (it needs a known batch size).
    shard = cluster.process_count() == 1
    if name == "data_parallel":
        return keras.distribution.DataParallel(devices=devices,
                                               auto_shard_dataset=shard)
    size = len(devices) if model_parallel is None else model_parallel
    if (isinstance(size, bool) or not isinstance(size, int) or size < 1
            or len(devices) % size):
        raise ValueError(
            "Argument `--model_parallel` must be a positive divisor of the "
            f"{len(devices)} local device(s) (the `model` axis of the "
            f"(batch, model) mesh). Received: --model_parallel={size}")
    if not shard:
        raise ValueError(
            "Argument `--distribution=model_parallel` is for the devices of "
            "one process: a run of several processes "
            f"(--num_processes={cluster.process_count()}) trains with "
            "--distribution=data_parallel.")
    mesh = keras.distribution.DeviceMesh(
        shape=(len(devices) // size, size), axis_names=("batch", "model"),
        devices=devices)
    return keras.distribution.ModelParallel(layout_map=layout_map(mesh),
                                            batch_dim_name="batch")

