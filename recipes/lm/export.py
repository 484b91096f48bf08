"""The serving SavedModel: prompts in, generated text out."""

from keras_synth.models import export_generator
from recipes import serving
from recipes.core import run_directory

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
    def write(tmp):
        export_generator(lm, tmp)
        serving.write_readme(tmp, export_usage("path/to/export"))

    run_directory.atomic_write(path, write)
    return path


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
