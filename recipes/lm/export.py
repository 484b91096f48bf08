"""The serving SavedModel (prompts in, generated text out) and the
keras-hub preset."""

from keras_synth.models import export_generator
from recipes import serving

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
    """
    return serving.write_export(
        path, lambda tmp: export_generator(lm, tmp), export_usage)


def export_usage(path):
    """How to load and call the export at `path` (see `serving.usage`);
    also written as `<path>/assets/README.md`."""
    return serving.usage(
        path, SIGNATURE,
        {"prompt": "string tensor `(batch,)`, raw text (tokenized inside)"},
        {"generated": "string `(batch,)`: each prompt followed by the "
         "generated text",
         "prompt_truncated": "bool `(batch,)`: the prompt had more tokens "
         "than the context holds and was cut"},
        'prompt=tf.constant(["ROMEO:"])')


__all__ = ["SIGNATURE", "export_saved_model", "export_usage"]
