"""The serving SavedModel of an encoder-decoder recipe (strings in, strings
out) and how to call it, under the names of a
`recipes.core.seq2seq.Endpoint` (translation's by default)."""

from keras_synth.models import export_generator
from recipes import serving
from recipes.core.seq2seq import TRANSLATE


def export_saved_model(path, lm, endpoint=TRANSLATE):
    """Writes `keras_synth.models.export_generator`'s SavedModel of `lm`
    (a `SynthesizerSeq2SeqLM` with its preprocessor) with `endpoint`'s
    signature (`translate` by default).

    Input: `endpoint.input_name` (`source`), a `(batch,)` string tensor.
    Outputs: `endpoint.output_name` (`translation`) `(batch,)` strings and
    `source_truncated` `(batch,)` bool (True where the input had more
    tokens than the model's source length holds and was cut to them).
    WordPiece tokenization, the search (the sampler `lm` was compiled
    with: greedy or beam search, with the decoder caches) and
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
        lambda tmp: export_generator(lm, tmp, signature=endpoint.signature,
                                     input_name=endpoint.input_name,
                                     output_name=endpoint.output_name),
        lambda p: export_usage(p, endpoint))


def export_usage(path, endpoint=TRANSLATE):
    """How to load and call the export at `path` (see `serving.usage`);
    also written as `<path>/assets/README.md`."""
    return serving.usage(
        path, endpoint.signature,
        {endpoint.input_name: "string tensor `(batch,)`, raw texts"},
        {endpoint.output_name: "string `(batch,)`, detokenized",
         "source_truncated": "bool `(batch,)`: the input had more tokens "
         "than the model's source length holds and was cut"},
        f"{endpoint.input_name}=tf.constant([{endpoint.example!r}])")


__all__ = ["export_saved_model", "export_usage"]
