"""The devices a recipe computes on: logical devices split from the first
GPU or the CPU (`KERAS_SYNTH_LOGICAL_DEVICES`), and their description for
the log.
"""

import os

from recipes.core.precision import DEFAULT_MATMUL_PRECISION
from recipes.core.precision import configure_matmul_precision


# Environment variable: split the first GPU (or, without one, the CPU) into
# this many logical devices, e.g. to run `--strategy=mirrored` with two
# replicas on one GPU. Read by `select_strategy` before TensorFlow starts.
LOGICAL_DEVICES_ENV = "KERAS_SYNTH_LOGICAL_DEVICES"
# Memory (MiB) of each logical GPU made by `KERAS_SYNTH_LOGICAL_DEVICES`.
LOGICAL_GPU_MEMORY_ENV = "KERAS_SYNTH_LOGICAL_GPU_MEMORY_MB"
DEFAULT_LOGICAL_GPU_MEMORY_MB = 8192


def log_devices(strategy, matmul_precision=DEFAULT_MATMUL_PRECISION,
                log=print):
    """Sets `--matmul_precision` (`configure_matmul_precision`) and logs
    the devices the strategy computes on (`describe_devices`) with it."""
    configure_matmul_precision(matmul_precision)
    tf32 = ("TF32 allowed" if matmul_precision == "high"
            else "full float32, TF32 off")
    log(f"Devices: {describe_devices(strategy)}; float32 matmuls: "
        f"{matmul_precision} ({tf32}).")


def describe_devices(strategy):
    """The devices `strategy` computes on, for the log: each device's name
    with its GPU model (e.g. `GPU:0 (NVIDIA H200)`), or `CPU (no GPU
    found)` when no GPU was found (`one_device` then runs on the CPU)."""
    if hasattr(strategy, "device_models"):  # JAX, PyTorch: BackendStrategy
        devices, names = strategy.worker_devices, strategy.device_models
    else:
        devices = list(getattr(strategy.extended, "worker_devices", ())) or [
            getattr(strategy.extended, "_device", "CPU")]
        names = _gpu_names()
    labels = []
    for device in devices:
        short = device.rsplit("device:", 1)[-1].upper()
        if short.startswith("GPU"):
            labels.append(f"{short} ({names.get(short, 'GPU')})")
        else:
            labels.append(short)
    text = ", ".join(labels)
    if not any(label.startswith("GPU") for label in labels):
        text = ("CPU (no GPU found)" if text in ("CPU", "CPU:0")
                else f"{text} (no GPU found)")
    return text


def _gpu_names():
    """`{"GPU:i": model name}` for the logical GPUs TensorFlow sees (a
    physical GPU split in several logical ones names each of them)."""
    import tensorflow as tf

    physical = tf.config.list_physical_devices("GPU")
    logical = tf.config.list_logical_devices("GPU")
    models = []
    for device in physical:
        try:
            details = tf.config.experimental.get_device_details(device)
        except Exception:  # pragma: no cover - depends on the driver
            details = {}
        models.append(details.get("device_name", "GPU"))
    names = {}
    for i, _ in enumerate(logical):
        model = (models[i] if len(models) == len(logical)
                 else models[0] if len(models) == 1 else "GPU")
        names[f"GPU:{i}"] = model
    return names


def split_logical_devices(environ=None):
    """Splits the first GPU, or the CPU without a GPU, into the number of
    logical devices that `KERAS_SYNTH_LOGICAL_DEVICES` names (unset: no
    change), each logical GPU with `KERAS_SYNTH_LOGICAL_GPU_MEMORY_MB` MiB
    (default 8192). Returns that number (1 when unset).

    TensorFlow fixes its devices when it initialises: call this before
    any op runs (`select_strategy` does). A split already in place is
    kept.

    Raises:
        ValueError: naming the variable, for a value that is not a
            positive integer.
        RuntimeError: TensorFlow already initialised with other devices.
    """
    import tensorflow as tf

    environ = os.environ if environ is None else environ
    count = _positive_int_env(environ, LOGICAL_DEVICES_ENV, 1)
    if count == 1 and not environ.get(LOGICAL_DEVICES_ENV, "").strip():
        return 1
    gpus = tf.config.list_physical_devices("GPU")
    device = gpus[0] if gpus else tf.config.list_physical_devices("CPU")[0]
    if gpus:
        memory = _positive_int_env(environ, LOGICAL_GPU_MEMORY_ENV,
                                   DEFAULT_LOGICAL_GPU_MEMORY_MB)
        config = [tf.config.LogicalDeviceConfiguration(memory_limit=memory)
                  for _ in range(count)]
    else:
        config = [tf.config.LogicalDeviceConfiguration()
                  for _ in range(count)]
    current = tf.config.get_logical_device_configuration(device)
    if current is not None and len(current) == count:
        return count
    try:
        tf.config.set_logical_device_configuration(device, config)
    except RuntimeError as error:
        raise RuntimeError(
            f"{LOGICAL_DEVICES_ENV}={count} cannot split {device.name}: "
            f"TensorFlow has already initialised its devices ({error}). "
            "Set it before the process runs any TensorFlow op."
        ) from None
    return count


def _positive_int_env(environ, name, default):
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"Environment variable `{name}` must be a positive integer. "
            f"Received: {name}={text!r}"
        )
    return value
