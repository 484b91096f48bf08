"""`quantize` of the backbones and tasks: without Keras's warning for every
layer that has nothing to quantize, and, for tasks, straight after
`from_preset` and reloadable."""

import contextlib
import inspect
import warnings

# What `keras.Model.quantize` warns for each layer without a `quantize`
# (layer norms, dropout, inputs, pooling: nothing to quantize).
NOTHING_TO_QUANTIZE = r"Layer \w+ does not have a `quantize` method"


def keras_hub_can_quantize():
    """Whether keras-hub's `ReversibleEmbedding.quantize` takes the
    arguments this Keras passes (keras-hub before 0.23 lacks `config`)."""
    import keras

    from keras_synth._hub import keras_hub

    wanted = inspect.signature(keras.layers.Embedding.quantize).parameters
    given = inspect.signature(
        keras_hub.layers.ReversibleEmbedding.quantize).parameters
    return "config" not in wanted or "config" in given


def check_keras_hub_quantize():
    """A clear error, before any layer is touched, where keras-hub's token
    embedding cannot be quantized under this Keras."""
    if keras_hub_can_quantize():
        return
    import keras

    from keras_synth._hub import keras_hub

    raise RuntimeError(
        f"`quantize` needs keras-hub>=0.23 with Keras {keras.__version__}: "
        f"keras-hub {keras_hub.__version__}'s ReversibleEmbedding.quantize "
        "does not take the `config` argument Keras passes. Upgrade "
        "keras-hub (`pip install -U keras-hub`)."
    )


class QuietQuantizeMixin:
    """`quantize` without Keras's warning for each layer that has no weights
    to quantize (other warnings, such as a synthesizer's for a mode it
    does not support, are kept). Mixed in before the keras-hub class."""

    def quantize(self, mode=None, **kwargs):
        check_keras_hub_quantize()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", NOTHING_TO_QUANTIZE,
                                    UserWarning)
            super().quantize(mode, **kwargs)


class QuantizeMixin(QuietQuantizeMixin):
    """`quantize` that works before the task's first call.

    `keras.Model.quantize` visits every layer without sublayers and refuses
    one that is not built. A task loaded with `from_preset` has its
    backbone and head built, but its preprocessor's layers (tokenizer,
    packers: no weights) are built on their first call, so keras-hub's
    tasks raise "Cannot quantize a layer that isn't yet built" until then.
    Here those weightless layers count as built while `quantize` runs (they
    are skipped, as Keras skips every layer without a `quantize`), and the
    cached generate function is dropped with Keras's compiled ones.

    A quantized task's config names its quantized head layers (the
    backbone's config carries its own, keras-hub's `DTypePolicyMap`), and
    `from_config` quantizes them again, so that `.keras` files and presets
    of a quantized task reload (keras-hub's tasks rebuild a float head and
    fail to load its int8 weights).
    """

    def quantize(self, mode=None, **kwargs):
        with weightless_layers_built(self.preprocessor):
            super().quantize(mode, **kwargs)
        if hasattr(self, "generate_function"):
            self.generate_function = None

    def get_config(self):
        config = super().get_config()
        inner = {id(layer) for part in (self.backbone, self.preprocessor)
                 if part is not None for layer in part._flatten_layers()}
        head = {layer.path: layer.quantization_mode
                for layer in self._flatten_layers(include_self=False)
                if id(layer) not in inner
                and layer.quantization_mode is not None}
        if head:
            config["quantized_layers"] = head
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        head = config.pop("quantized_layers", None) or {}
        task = super().from_config(config)
        for layer in task._flatten_layers(include_self=False):
            if layer.path in head:
                layer.quantize(head[layer.path])
        return task


@contextlib.contextmanager
def weightless_layers_built(layer):
    """Within the block, the unbuilt layers of `layer` (maybe `None`) that
    hold no weights are marked built; afterwards, unbuilt again."""
    marked = []
    if layer is not None:
        for sublayer in layer._flatten_layers():
            if not sublayer.built and not sublayer.weights:
                sublayer.built = True
                marked.append(sublayer)
    try:
        yield
    finally:
        for sublayer in marked:
            sublayer.built = False
