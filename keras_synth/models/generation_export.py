"""`export_generator`: a SavedModel of a generative task, strings in and out."""

import keras

SIGNATURE = "generate"


def export_generator(lm, path, max_length=None, stop_token_ids="auto"):
    """Writes a SavedModel that generates text from raw strings.

    Its `generate` signature takes `prompt`, a `(batch,)` string tensor
    (prompts of a `SynthesizerCausalLM`, sources of a
    `SynthesizerSeq2SeqLM`) and returns `generated`, `(batch,)` strings
    (for a causal LM the prompt followed by its continuation, as
    `generate()` returns). Tokenization, the cached search with the task's
    compiled sampler, and detokenization run inside the graph. Needs the
    TensorFlow backend.

    ```python
    reloaded = tf.saved_model.load(path)
    reloaded.generate(tf.constant(["Ein Hund läuft."]))["generated"]
    ```

    Args:
        lm: a `SynthesizerCausalLM` or `SynthesizerSeq2SeqLM` with a
            preprocessor.
        path: the SavedModel folder.
        max_length: the generated length; defaults to the preprocessor's
            (decoder) sequence length.
        stop_token_ids: `"auto"` (the tokenizer's end token), `None` or a
            tuple of ids.

    Returns:
        `path`.
    """
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "export_generator writes a TensorFlow SavedModel and needs "
            "KERAS_BACKEND=tensorflow; the backend is "
            f"{keras.backend.backend()!r}."
        )
    preprocessor = lm.preprocessor
    if preprocessor is None:
        raise ValueError(
            "Argument `lm` has no preprocessor; a SavedModel that takes raw "
            "strings needs one."
        )
    if max_length is None:
        max_length = preprocessor.sequence_length
    if max_length > lm.backbone.max_sequence_length:
        raise ValueError(
            f"Argument `max_length`={max_length} is beyond the backbone's "
            f"max_sequence_length={lm.backbone.max_sequence_length}."
        )
    tokenizer = preprocessor.tokenizer
    if stop_token_ids == "auto":
        stop_token_ids = (tokenizer.end_token_id,)
    special = tf.constant(sorted(set(tokenizer.special_token_ids)), tf.int32)
    seq2seq = "encoder_token_ids" in lm.input
    key = "decoder_" if seq2seq else ""
    for layer in (preprocessor, tokenizer):
        if not layer.built:  # (tokenizers build on their first call)
            layer.build(None)

    def generate(prompt):
        inputs = preprocessor.generate_preprocess(
            prompt, sequence_length=max_length
        )
        outputs = lm.generate_step(inputs, stop_token_ids=stop_token_ids)
        ids = tf.cast(outputs[key + "token_ids"], tf.int32)
        keep = tf.logical_and(
            tf.cast(outputs[key + "padding_mask"], tf.bool),
            tf.reduce_all(ids[..., None] != special, axis=-1),
        )
        text = tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))
        return {"generated": text}

    archive = keras.export.ExportArchive()
    archive.track(lm)
    archive.track(tokenizer)
    archive.add_endpoint(
        SIGNATURE,
        generate,
        input_signature=[tf.TensorSpec([None], tf.string, name="prompt")],
    )
    archive.write_out(path, verbose=False)
    return path
