"""The serving SavedModel: strings in, translations out."""

from recipes import common

common.require_tensorflow_backend()

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

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
    # Written to a temporary folder, then renamed: a kill while exporting
    # never leaves a half-written SavedModel at `path`.
    common.atomic_write(
        path, lambda tmp: archive.write_out(tmp, verbose=False))
    return path


__all__ = ["SIGNATURE", "export_saved_model"]
