"""The serving SavedModel: prompts in, generated text out."""

from recipes import common

common.require_tensorflow_backend()

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

SIGNATURE = "generate"


def export_saved_model(path, lm):
    """Writes a SavedModel with a `generate` signature.

    Input: `prompts`, a `(batch,)` string tensor. Output: `text`, `(batch,)`
    strings, each prompt followed by what the model generated (up to the
    model's context length in tokens, with the sampler `lm` was compiled
    with; cached decoding). Tokenization, sampling and detokenization run
    inside the graph:

    ```python
    reloaded = tf.saved_model.load(path)
    reloaded.signatures["generate"](prompts=tf.constant(["ROMEO:"]))
    # or: reloaded.generate(tf.constant(["ROMEO:"]))
    ```

    Args:
        path: the SavedModel folder.
        lm: a `SynthesizerCausalLM` with a preprocessor, compiled.
    """
    preprocessor = lm.preprocessor
    tokenizer = preprocessor.tokenizer
    for layer in (preprocessor, tokenizer):
        if not layer.built:
            layer.build(None)
    end = tokenizer.token_to_id("[SEP]")
    reserved = tf.constant([
        tokenizer.token_to_id(t) for t in ("[PAD]", "[CLS]", "[SEP]")])

    def generate(prompts):
        x = preprocessor.generate_preprocess(prompts)
        outputs = lm.generate_step(x, stop_token_ids=(end,))
        ids = tf.cast(outputs["token_ids"], tf.int32)
        # The generated tokens without padding, start and end tokens.
        keep = tf.logical_and(
            tf.cast(outputs["padding_mask"], tf.bool),
            tf.reduce_all(ids[..., None] != reserved, axis=-1))
        text = tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))
        return {"text": text}

    archive = keras.export.ExportArchive()
    archive.track(lm)
    archive.track(preprocessor)
    archive.track(tokenizer)
    archive.add_endpoint(
        SIGNATURE, generate,
        input_signature=[tf.TensorSpec([None], tf.string, name="prompts")],
    )
    common.atomic_write(
        path, lambda tmp: archive.write_out(tmp, verbose=False))
    return path


__all__ = ["SIGNATURE", "export_saved_model"]
