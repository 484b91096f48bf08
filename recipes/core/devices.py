"""The devices a recipe computes on and how precisely: logical devices
split from the first GPU or the CPU (`KERAS_SYNTH_LOGICAL_DEVICES`), the
devices of JAX and PyTorch, their line in the log, Keras' dtype policy
(`--mixed_precision`), the float32 matmul precision (`--matmul_precision`)
and what `results.json` records of the machine.
"""

import os

# Environment variable: split the first GPU (or, without one, the CPU) into
# this many logical devices, e.g. to run `--strategy=mirrored` with two
# replicas on one GPU. Read by `select_strategy` before TensorFlow starts.
LOGICAL_DEVICES_ENV = "KERAS_SYNTH_LOGICAL_DEVICES"
# Memory (MiB) of each logical GPU made by `KERAS_SYNTH_LOGICAL_DEVICES`.
LOGICAL_GPU_MEMORY_ENV = "KERAS_SYNTH_LOGICAL_GPU_MEMORY_MB"
DEFAULT_LOGICAL_GPU_MEMORY_MB = 8192
PRECISIONS = ("float32", "bfloat16", "float16")
# `--matmul_precision`: float32 matrix products and convolutions in full
# float32 ("highest") or in TensorFloat-32 where the GPU has it ("high").
MATMUL_PRECISIONS = ("highest", "high")
DEFAULT_MATMUL_PRECISION = "highest"


def check_choice(value, choices, what, flag):
    """Raises a ValueError naming `--flag` unless `value` is in `choices`
    (the check of a function called without the command line)."""
    if value not in choices:
        raise ValueError(f"Unknown {what} {value!r} (argument `--{flag}`). "
                         f"Expected one of {choices}.")


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
    memory = (_positive_int_env(environ, LOGICAL_GPU_MEMORY_ENV,
                                DEFAULT_LOGICAL_GPU_MEMORY_MB)
              if gpus else None)
    config = [tf.config.LogicalDeviceConfiguration(memory_limit=memory)
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


def local_devices(backend):
    """`(devices, models)`: the devices JAX or PyTorch computes on, named
    `"GPU:i"` or `"CPU:i"`, and `{"GPU:i": model name}`."""
    if backend == "jax":
        import jax

        devices, models = [], {}
        for i, device in enumerate(jax.local_devices()):
            kind = "GPU" if device.platform in ("gpu", "cuda", "rocm") else (
                device.platform.upper())
            devices.append(f"{kind}:{i}")
            if kind == "GPU":
                models[f"{kind}:{i}"] = device.device_kind
        return devices, models
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return [f"GPU:{index}"], {
            f"GPU:{index}": torch.cuda.get_device_name(index)}
    return ["CPU:0"], {}


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
        labels.append(f"{short} ({names.get(short, 'GPU')})"
                      if short.startswith("GPU") else short)
    text = ", ".join(labels)
    if not any(label.startswith("GPU") for label in labels):
        text = ("CPU (no GPU found)" if text in ("CPU", "CPU:0")
                else f"{text} (no GPU found)")
    return text


def _gpu_names():
    """`{"GPU:i": model name}` for the logical GPUs TensorFlow sees (a
    physical GPU split in several logical ones names each of them)."""
    import tensorflow as tf

    logical = tf.config.list_logical_devices("GPU")
    models = []
    for device in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(device)
        except Exception:  # pragma: no cover - depends on the driver
            details = {}
        models.append(details.get("device_name", "GPU"))
    return {f"GPU:{i}": (models[i] if len(models) == len(logical)
                         else models[0] if len(models) == 1 else "GPU")
            for i in range(len(logical))}


def configure_precision(mixed_precision):
    """Sets Keras' global dtype policy from `--mixed_precision`.

    `float16` gets dynamic loss scaling from `Model.compile`
    (`auto_scale_loss=True`); `bfloat16` needs none.
    """
    import keras

    check_choice(mixed_precision, PRECISIONS, "precision", "mixed_precision")
    policy = ("float32" if mixed_precision == "float32"
              else f"mixed_{mixed_precision}")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def configure_matmul_precision(precision):
    """Sets the backend's float32 matrix-product precision
    (`--matmul_precision`; TensorFlow, JAX or PyTorch).

    NVIDIA GPUs from Ampere on run float32 matrix products and convolutions
    in TensorFloat-32 (inputs rounded to a 10-bit mantissa) unless told
    otherwise, so a "float32" model differs from its CPU run by about 1e-3
    relatively. `"highest"` (the default) turns TF32 off: float32 is
    float32 on every device. `"high"` allows it (faster on such GPUs). CPUs
    and the bfloat16/float16 policies' products are unaffected.

    Raises:
        ValueError: naming `--matmul_precision`, for another value.
    """
    import keras

    check_choice(precision, MATMUL_PRECISIONS, "matmul precision",
                 "matmul_precision")
    tf32 = precision == "high"
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision",
                          "tensorfloat32" if tf32 else "highest")
    elif backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    else:
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    return precision


def environment():
    """Versions and devices, for results.json."""
    import datetime
    import platform

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
