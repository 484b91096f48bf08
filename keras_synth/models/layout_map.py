"""`get_layout_map`, shared by the backbones: how their variables are laid
out over a `(batch, model)` `keras.distribution.DeviceMesh` (JAX) for
`keras.distribution.ModelParallel`."""

import keras

# (path pattern, layout): the model axis shards the embeddings' features,
# the attention projections and the random synthesizers' `H x l x l`
# logits by heads, the feedforward kernels by their inner features. Each
# variable path matches one pattern at most (`LayoutMap` full-matches
# them); the others are replicated.
_LAYOUTS = (
    (r"(?:.*/)?(token|position)_embedding/embeddings", (None, "model")),
    (r"(?:.*/)?(query|key|value)/kernel", (None, "model", None)),
    (r"(?:.*/)?(query|key|value)/bias", ("model", None)),
    (r"(?:.*/)?attention_output/kernel", ("model", None, None)),
    (r"(?:.*/)?feedforward_intermediate_dense/kernel", (None, "model")),
    (r"(?:.*/)?feedforward_intermediate_dense/bias", ("model",)),
    (r"(?:.*/)?feedforward_output_dense/kernel", ("model", None)),
    (r"(?:.*/)?(random|fixed_random)/logits", ("model", None, None)),
)


class LayoutMapMixin:
    """Gives a backbone `get_layout_map(device_mesh)`."""

    @classmethod
    def get_layout_map(cls, device_mesh, model_parallel_dim_name="model"):
        """A `keras.distribution.LayoutMap` of the backbone's variables.

        The `model_parallel_dim_name` axis of `device_mesh` shards the
        token and position embeddings' features, the query, key, value
        and output projections and the random synthesizers' logits by
        heads, and the feedforward kernels by their inner features; the
        other variables are replicated. The sharded sizes (heads, hidden
        and intermediate widths) must divide by that axis' size.

        Example:

        ```python
        import keras
        from keras_synth.models import SynthesizerBackbone

        mesh = keras.distribution.DeviceMesh(
            shape=(1, 1), axis_names=("batch", "model"),
            devices=["cpu:0"])
        layout_map = SynthesizerBackbone.get_layout_map(mesh)
        axes = layout_map["encoder_0/self_attention_layer/random/logits"].axes
        assert tuple(axes) == ("model", None, None)
        ```

        Under `keras.distribution.ModelParallel(layout_map=layout_map,
        batch_dim_name="batch")` (JAX) a backbone built in its scope gets
        these layouts.
        """
        if model_parallel_dim_name not in device_mesh.axis_names:
            raise ValueError(
                f"Argument `model_parallel_dim_name={model_parallel_dim_name!r}`"
                f" is not an axis of the device mesh. Received: axis_names="
                f"{device_mesh.axis_names}")
        layout_map = keras.distribution.LayoutMap(device_mesh)
        for pattern, axes in _LAYOUTS:
            layout_map[pattern] = tuple(
                model_parallel_dim_name if axis == "model" else axis
                for axis in axes)
        return layout_map
