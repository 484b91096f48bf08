"""The serving SavedModel: prompts in, generated text out."""

from recipes import common

common.require_tensorflow_backend()

from keras_synth.models import export_generator  # noqa: E402

SIGNATURE = "generate"


def export_saved_model(path, lm):
    """Writes `keras_synth.models.export_generator`'s SavedModel of `lm`.

    Its `generate` signature takes `prompt`, a `(batch,)` string tensor, and
    returns `generated`, `(batch,)` strings: each prompt followed by what the
    model generated, up to the model's context length in tokens, with the
    sampler `lm` was compiled with (cached decoding in the graph):

    ```python
    reloaded = tf.saved_model.load(path)
    reloaded.signatures["generate"](prompt=tf.constant(["ROMEO:"]))
    ```

    Written at a temporary name, then renamed: a kill while exporting never
    leaves a half-written SavedModel at `path`.
    """
    common.atomic_write(path, lambda tmp: export_generator(lm, tmp))
    return path


__all__ = ["SIGNATURE", "export_saved_model"]
