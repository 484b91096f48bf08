"""The tf.distribute strategy of a recipe (`--strategy`, `--tpu`), created
first, before TensorFlow runs any op, and the `--jit_compile` check that
goes with it.
"""

from recipes.core.cluster import DEFAULT_CLUSTER_TIMEOUT
from recipes.core.cluster import multi_worker_strategy
from recipes.core.devices import split_logical_devices


STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")


def select_strategy(name, tpu=None,
                    cluster_timeout=DEFAULT_CLUSTER_TIMEOUT):
    """Returns the `tf.distribute.Strategy` called `name`.

    Call it first, before TensorFlow runs any op:
    `MultiWorkerMirroredStrategy` configures the process's collective ops,
    which is only possible at program start-up, and the TPU system is
    initialised before it is used.

    - `one_device`: the first GPU, else the CPU.
    - `mirrored`: `MirroredStrategy` over all local GPUs, or over all logical
      CPU devices when there is no GPU (useful to test distribution).
    - `multi_worker`: `MultiWorkerMirroredStrategy`, cluster from `TF_CONFIG`
      (checked first); the process ends with an error if the cluster is
      not up within `cluster_timeout` seconds.
    - `tpu`: `TPUStrategy` on the TPU named by `tpu`.

    With the environment variable `KERAS_SYNTH_LOGICAL_DEVICES=N`, the
    first GPU (without a GPU, the CPU) is first split into `N` logical
    devices (`split_logical_devices`).
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy {name!r} (argument `--strategy`). Expected one "
            f"of {STRATEGIES}."
        )
    if name != "tpu" and tpu:
        raise ValueError(
            f"Argument `--tpu={tpu}` needs `--strategy=tpu`. Received: "
            f"--strategy={name}"
        )
    if name == "multi_worker":
        return multi_worker_strategy(cluster_timeout)
    split_logical_devices()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "one_device":
        device = gpus[0].name if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        if gpus:
            return tf.distribute.MirroredStrategy([d.name for d in gpus])
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            cpus, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if not tpu:
        raise ValueError(
            "Argument `--tpu` is required by `--strategy=tpu`: the TPU name, "
            "a grpc:// address, or 'local' on a TPU VM."
        )
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


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
