"""Where a recipe runs: the backend it needs, its tf.distribute strategy,
its precision, whether this process is the chief, and the entry point
(`run_main`) that sets all that up before TensorFlow is imported.
"""

import datetime
import json
import os
import platform
import sys

STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "bfloat16", "float16")


def require_tensorflow_backend():
    """Selects the TensorFlow backend, or explains why it can't.

    The recipes use tf.data, tf.distribute and SavedModel. Call this before
    importing keras: it sets `KERAS_BACKEND=tensorflow` when unset.

    Raises:
        RuntimeError: another backend is forced.
    """
    backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if "keras" in sys.modules:
        import keras

        backend = keras.backend.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            "The recipes run on the TensorFlow backend (tf.data, "
            "tf.distribute, SavedModel), but KERAS_BACKEND="
            f"{backend!r} is set. Unset it or run with "
            "KERAS_BACKEND=tensorflow."
        )


def select_strategy(name, tpu=None):
    """Returns the `tf.distribute.Strategy` called `name`.

    - `one_device`: the first GPU, else the CPU.
    - `mirrored`: `MirroredStrategy` over all local GPUs, or over all logical
      CPU devices when there is no GPU (useful to test distribution).
    - `multi_worker`: `MultiWorkerMirroredStrategy`, cluster from `TF_CONFIG`.
    - `tpu`: `TPUStrategy` on the TPU named by `tpu`.
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
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if not tpu:
        raise ValueError(
            "Argument `--tpu` is required by `--strategy=tpu`: the TPU name, "
            "a grpc:// address, or 'local' on a TPU VM."
        )
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def setup(args, log=print):
    """Seeds Keras (`--seed`), sets the dtype policy (`--mixed_precision`)
    and returns the strategy (`--strategy`, `--tpu`), logging both."""
    import keras

    keras.utils.set_random_seed(args.seed)
    policy = configure_precision(args.mixed_precision)
    strategy = select_strategy(args.strategy, args.tpu)
    log(f"Strategy: {type(strategy).__name__} with "
        f"{strategy.num_replicas_in_sync} replica(s); dtype policy {policy}.")
    return strategy


def is_chief():
    """Whether this process writes the run directory (worker 0 / chief)."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task", {})
    kind = task.get("type", "chief")
    return kind == "chief" or (
        kind == "worker" and task.get("index", 0) == 0
        and "chief" not in config.get("cluster", {})
    )


def configure_precision(mixed_precision):
    """Sets Keras' global dtype policy from `--mixed_precision`.

    `float16` gets dynamic loss scaling from `Model.compile`
    (`auto_scale_loss=True`); `bfloat16` needs none.
    """
    import keras

    if mixed_precision not in PRECISIONS:
        raise ValueError(
            f"Unknown precision {mixed_precision!r} (argument "
            f"`--mixed_precision`). Expected one of {PRECISIONS}."
        )
    policy = ("float32" if mixed_precision == "float32"
              else f"mixed_{mixed_precision}")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def environment():
    """Versions and devices, for results.json."""
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    for module in ("keras", "tensorflow", "keras_hub", "keras_synth"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - optional
            pass
    try:
        import tensorflow as tf

        info["devices"] = [d.name for d in tf.config.list_logical_devices()]
    except Exception:  # pragma: no cover
        pass
    return info


def run_main(parser, run, prog, argv=None, input_paths=()):
    """Parses `argv` and calls `run(args)`; returns the exit status.

    Before TensorFlow is imported, the flags named in `input_paths` are
    checked (a missing file or folder is reported at once). TensorFlow's
    logs and Python warnings are hidden during the run unless `--tf_logs`
    is given. A `ValueError` (bad arguments, `DataError`) or `RuntimeError`
    prints one line `prog: error: ...` and returns 2 (set
    `RECIPES_TRACEBACK=1` for the traceback).
    """
    from recipes import cli

    args = parser.parse_args(argv)
    try:
        cli.check_input_paths(args, input_paths)
        require_tensorflow_backend()
        with cli.quiet_tensorflow(not getattr(args, "tf_logs", False)):
            run(args)
    except (ValueError, RuntimeError) as error:
        if os.environ.get("RECIPES_TRACEBACK"):
            raise
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    return 0
