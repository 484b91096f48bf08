"""Trains a tiny `SynthesizerTextClassifier` on one device, then under
`keras.distribution.DataParallel` and `ModelParallel` over a (2, 2) mesh
(the backbone's `get_layout_map`) from the same seed, and prints `RESULT
<json>`: each run's losses and weights, and the sharded variables' layouts.

Run in a fresh process with `XLA_FLAGS=--xla_force_host_platform_device_count=4`
and `KERAS_BACKEND=jax` (the flag is read when JAX starts).
"""

import json

import keras
import numpy as np

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier


def train(distribution):
    keras.distribution.set_distribution(distribution)
    keras.utils.set_random_seed(0)
    backbone = SynthesizerBackbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=8,
        synthesizer="random+vanilla", dropout=0.0)
    model = SynthesizerTextClassifier(backbone, num_classes=2,
                                      preprocessor=None, dropout=0.0)
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 64, (16, 8)).astype("int32"),
         "segment_ids": np.zeros((16, 8), "int32"),
         "padding_mask": np.ones((16, 8), "int32")}
    y = rng.integers(0, 2, (16,)).astype("int32")
    history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False,
                        verbose=0)
    weights = {v.path: keras.ops.convert_to_numpy(v).tolist()
               for v in model.weights}
    layouts = {v.path: list(getattr(v.value.sharding, "spec", ()))
               for v in model.weights}
    layouts = {path: spec for path, spec in layouts.items()
               if any(axis is not None for axis in spec)}
    keras.distribution.set_distribution(None)
    return {"loss": history.history["loss"], "weights": weights,
            "layouts": layouts}


devices = keras.distribution.list_devices()
mesh = keras.distribution.DeviceMesh((2, 2), ("batch", "model"), devices)
print("RESULT " + json.dumps({
    "devices": len(devices),
    "one": train(None),
    "data_parallel": train(keras.distribution.DataParallel(devices=devices)),
    "model_parallel": train(keras.distribution.ModelParallel(
        layout_map=SynthesizerBackbone.get_layout_map(mesh),
        batch_dim_name="batch")),
}))
