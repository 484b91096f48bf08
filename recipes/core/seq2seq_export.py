"""The serving SavedModel (strings in, translations out) and the `.keras`
model."""

from keras_synth.models import export_generator
from recipes import serving

SIGNATURE = "translate"


def export_saved_model(path, lm):
    """Writes `keras_synth.models.export_generator`'s SavedModel of `lm`
    (a `SynthesizerSeq2SeqLM` with its preprocessor) with a `translate`
    signature.

    Input: `source`, a `(batch,)` string tensor of sentences. Outputs:
    `translation` `(batch,)` strings and `source_truncated` `(batch,)` bool
    (True where the source had more tokens than `max_length` holds and was
    cut to them). WordPiece tokenization, the search (the sampler `lm` was
    compiled with: greedy or beam search, with the decoder caches) and
    detokenization run inside the graph:

    ```python
    import tensorflow_text  # the tokenizer's ops
    reloaded = tf.saved_model.load(path)
    reloaded.signatures["translate"](source=tf.constant(["Ein Hund."]))
    # or: reloaded.translate(tf.constant(["Ein Hund."]))
    ```
    """
    return serving.write_export(
        path,
        lambda tmp: export_generator(lm, tmp, signature=SIGNATURE,
                                     input_name="source",
                                     output_name="translation"),
        export_usage)


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
