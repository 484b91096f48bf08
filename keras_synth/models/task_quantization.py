"""`QuantizeMixin`: `task.quantize(mode)` straight after `from_preset`."""

import contextlib


class QuantizeMixin:
    """`quantize` that works before the task's first call.

    `keras.Model.quantize` visits every layer without sublayers and refuses
    one that is not built. A task loaded with `from_preset` has its
    backbone and head built, but its preprocessor's layers (tokenizer,
    packers: no weights) are built on their first call, so keras-hub's
    tasks raise "Cannot quantize a layer that isn't yet built" until then.
    Here those weightless layers count as built while `quantize` runs (they
    are skipped, as Keras skips every layer without a `quantize`), and the
    cached generate function is dropped with Keras's compiled ones.
    """

    def quantize(self, mode=None, **kwargs):
        with weightless_layers_built(self.preprocessor):
            super().quantize(mode, **kwargs)
        if hasattr(self, "generate_function"):
            self.generate_function = None


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
