"""The serving SavedModel: strings in, translations out."""

import keras
import tensorflow as tf

from recipes import serving
from recipes.core import run_directory

SIGNATURE = "translate"


def export_saved_model(path, translator):
    """Writes a SavedModel with a `translate` signature.

    Input: `source`, a `(batch,)` string tensor of sentences. Outputs:
    `translation` `(batch,)` strings and `source_truncated` `(batch,)` bool
    (True where the source had more than `max_length` tokens and was cut
    to them). WordPiece tokenization, the search (greedy or beam, as
    `translator` is configured, with the decoder caches) and detokenization
    run inside the graph:

    ```python
    import tensorflow_text  # the tokenizer's ops
    reloaded = tf.saved_model.load(path)
    reloaded.signatures["translate"](source=tf.constant(["Ein Hund."]))
    # or: reloaded.translate(tf.constant(["Ein Hund."]))
    ```

    Args:
        path: the SavedModel folder.
        translator: a `decoding.Translator`.
    """
    preprocessor = translator.preprocessor

    def translate(source):
        translations, truncated = translator.translate_batch(source)
        return {"translation": translations, "source_truncated": truncated}

    archive = keras.export.ExportArchive()
    archive.track(translator.model)
    archive.track(preprocessor.src_tokenizer)
    if not preprocessor.shared:
        archive.track(preprocessor.tgt_tokenizer)
    archive.add_endpoint(
        SIGNATURE, translate,
        input_signature=[tf.TensorSpec([None], tf.string, name="source")],
    )
    def write(tmp):
        archive.write_out(tmp, verbose=False)
        serving.write_readme(tmp, export_usage("path/to/export"))

    # Written to a temporary folder, then renamed: a kill while exporting
    # never leaves a half-written SavedModel at `path`.
    run_directory.atomic_write(path, write)
    return path


def export_usage(path):
    """How to load and call the export at `path` (see `serving.usage`);
    also written as `<path>/assets/README.md`."""
    return serving.usage(
        path, SIGNATURE,
        {"source": "string tensor `(batch,)`, raw sentences"},
        {"translation": "string `(batch,)`, detokenized",
         "source_truncated": "bool `(batch,)`: the source had more than "
         "max_length tokens and was cut"},
        'source=tf.constant(["Ein kleiner Hund spielt im Park."])')


__all__ = ["SIGNATURE", "export_saved_model", "export_usage"]
