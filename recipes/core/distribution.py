"""Where a recipe's variables and batches go on JAX and PyTorch: Keras' own
device placement, or on JAX `keras.distribution` (`--distribution`), behind
the few members of a `tf.distribute.Strategy` that the recipes use.
"""

import contextlib
import os

from recipes.core import processes

# `--distribution`: how JAX spreads a run over the local devices.
# `data_parallel`: `keras.distribution.DataParallel`, the batch split over
# every device, the variables replicated; `model_parallel`:
# `keras.distribution.ModelParallel` over a (batch, model) `DeviceMesh`,
# the variables laid out by the backbone's `get_layout_map`.
DISTRIBUTIONS = ("data_parallel", "model_parallel")


class BackendStrategy:
    """The stand-in for a `tf.distribute.Strategy` on JAX and PyTorch.

    The recipes build their model under `scope()` and read
    `num_replicas_in_sync`; this gives them Keras' own placement (one
    device, the default) or, on JAX, a `keras.distribution.Distribution`
    (entered by `scope()`, so that the variables get its layouts and the
    batches are split over its data-parallel axis).

    Args:
        distribution: a `keras.distribution.Distribution` or None.
        devices: the devices computed on, as `"GPU:0"`, `"CPU:0"`, ...
        device_models: `{"GPU:i": model name}` for the log.
    """

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


def local_devices(backend):
    """`(devices, models)`: the devices `backend` computes on, named
    `"GPU:i"` or `"CPU:i"`, and `{"GPU:i": model name}`."""
    if backend == "jax":
        import jax

        devices, models = [], {}
        for i, device in enumerate(jax.local_devices()):
            kind = "GPU" if device.platform in ("gpu", "cuda", "rocm") else (
                device.platform.upper())
            name = f"{kind}:{i}"
            devices.append(name)
            if kind == "GPU":
                models[name] = device.device_kind
        return devices, models
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return [f"GPU:{index}"], {
            f"GPU:{index}": torch.cuda.get_device_name(index)}
    return ["CPU:0"], {}


def keras_distribution(name, model_parallel=None, layout_map=None):
    """The `keras.distribution.Distribution` of `--distribution=name`
    over every local JAX device.

    Args:
        name: one of `DISTRIBUTIONS`.
        model_parallel: with `model_parallel`, the size of the mesh's
            `model` axis (a divisor of the number of devices); the `batch`
            axis takes the rest.
        layout_map: `(device_mesh) -> keras.distribution.LayoutMap`, the
            variables' layouts (the backbone's `get_layout_map`), for
            `model_parallel`.

    Raises:
        ValueError: naming `--model_parallel`, for a size that does not
            divide the devices.
    """
    import keras

    devices = keras.distribution.list_devices()
    # Several processes: each reads its share of every batch itself
    # (`processes.local_batches`), which Keras' sharding of a tf.data
    # pipeline cannot do for every recipe's (it needs a known batch size).
    shard = processes.process_count() == 1
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
    if processes.process_count() > 1:
        raise ValueError(
            "Argument `--distribution=model_parallel` is for the devices of "
            "one process: a run of several processes "
            f"(--num_processes={processes.process_count()}) trains with "
            "--distribution=data_parallel.")
    mesh = keras.distribution.DeviceMesh(
        shape=(len(devices) // size, size), axis_names=("batch", "model"),
        devices=devices)
    return keras.distribution.ModelParallel(
        layout_map=layout_map(mesh), batch_dim_name="batch",
        auto_shard_dataset=shard)



def backend_strategy(distribution=None, model_parallel=None,
                     layout_map=None, backend=None):
    """The `BackendStrategy` of this process's Keras backend (JAX or
    PyTorch): one device, or on JAX `--distribution`."""
    backend = backend or os.environ.get("KERAS_BACKEND")
    hide_gpus_from_tensorflow()
    devices, models = local_devices(backend)
    if distribution is None:
        return BackendStrategy(None, devices[:1], models)
    import keras

    chosen = keras_distribution(distribution, model_parallel, layout_map)
    # Global: Keras' JAX trainer splits the batches of `fit`, `evaluate`
    # and `predict` by the distribution set, not by the scope entered.
    keras.distribution.set_distribution(chosen)
    return BackendStrategy(chosen, devices, models)


def hide_gpus_from_tensorflow():
    """Keeps TensorFlow (the tf.data input pipelines) off the GPUs, which
    JAX or PyTorch compute on: TensorFlow would otherwise take most of
    their memory when it starts. Call it before TensorFlow runs any op."""
    import tensorflow as tf

    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # pragma: no cover - TensorFlow already started
        pass
