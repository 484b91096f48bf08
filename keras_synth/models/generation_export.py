"""`export_generator`: a SavedModel of a generative task, strings in and out."""

import keras

from keras_synth.layers.keras_utils import tracing_for_export

SIGNATURE = "generate"


def export_generator(
    lm,
    path,
    max_length=None,
    stop_token_ids="auto",
    signature=SIGNATURE,
    input_name="prompt",
    output_name="generated",
):
    """Writes a SavedModel that generates text from raw strings.

    Its `generate` signature takes `prompt`, a `(batch,)` string tensor
    (prompts of a `SynthesizerCausalLM`, sources of a
    `SynthesizerSeq2SeqLM`) and returns `generated`, `(batch,)` strings
    (for a causal LM the prompt followed by its continuation, as
    `generate()` returns), and `prompt_truncated`, `(batch,)` bools: True
    where the prompt had more tokens than the preprocessor's sequence
    length holds and was cut to it (nothing is cut silently): sources of a
    seq2seq model longer than `encoder_sequence_length`. A causal LM's
    prompt is never cut: one that fills the context (`max_length`) leaves
    no room to generate and the call fails with an `InvalidArgumentError`
    naming the context, so its `prompt_truncated` is always False. The
    preprocessor's `truncation="error"` makes cut sources fail the call
    too; `"warn"` cannot warn inside a SavedModel and relies on the flags.
    Load it with `keras_synth.models.load_export(path)`. Tokenization,
    the cached search with the task's compiled sampler, and detokenization
    run inside the graph. Needs the TensorFlow backend.

    ```python
    reloaded = keras_synth.models.load_export(path)
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
        signature: the name of the endpoint and signature. Defaults to
            `"generate"`.
        input_name: the name of the input. Defaults to `"prompt"`.
        output_name: the name of the generated strings. Defaults to
            `"generated"`; the truncation flags are
            `f"{input_name}_truncated"`.

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
    seq2seq = "encoder_token_ids" in lm.input
    key = "decoder_" if seq2seq else ""
    # The tokenizer of the prompt: a seq2seq preprocessor may have a source
    # tokenizer of its own.
    prompt_tokenizer = getattr(preprocessor, "encoder_tokenizer", None)
    if prompt_tokenizer is None:
        prompt_tokenizer = tokenizer
    prompt_key = "encoder_" if seq2seq else ""
    tokenizers = [tokenizer]
    if prompt_tokenizer is not tokenizer:
        tokenizers.append(prompt_tokenizer)
    for layer in [preprocessor] + tokenizers:
        if not layer.built:  # (tokenizers build on their first call)
            layer.build(None)

    def generate(prompt):
        inputs = preprocessor.generate_preprocess(
            prompt, sequence_length=max_length
        )
        outputs = lm.generate_step(inputs, stop_token_ids=stop_token_ids)
        text = tokenizer.detokenize(
            _content_tokens(
                tokenizer,
                outputs[key + "token_ids"],
                outputs[key + "padding_mask"],
            )
        )
        # The prompt was cut where packing kept fewer of its tokens than
        # the tokenizer made.
        kept = _content_tokens(
            prompt_tokenizer,
            inputs[prompt_key + "token_ids"],
            inputs[prompt_key + "padding_mask"],
        ).row_lengths()
        tokens = tf.ragged.boolean_mask(
            *_non_special(prompt_tokenizer, prompt_tokenizer(prompt))
        ).row_lengths()
        return {output_name: text, f"{input_name}_truncated": tokens > kept}

    archive = keras.export.ExportArchive()
    archive.track(lm)
    for layer in tokenizers:
        archive.track(layer)
    with tracing_for_export():
        archive.add_endpoint(
            signature,
            generate,
            input_signature=[
                tf.TensorSpec([None], tf.string, name=input_name)
            ],
        )
        archive.write_out(path, verbose=False)
    return path


def _non_special(tokenizer, ids):
    """`(ids, mask)`: int32 `ids` and where they are no special token."""
    import tensorflow as tf

    ids = tf.cast(ids, tf.int32)
    special = sorted(set(tokenizer.special_token_ids))
    mask = tf.ones_like(ids, tf.bool)
    for token in special:
        mask = tf.logical_and(mask, tf.not_equal(ids, token))
    return ids, mask


def _content_tokens(tokenizer, token_ids, padding_mask):
    """The ragged ids of packed sequences without padding nor special
    tokens."""
    import tensorflow as tf

    ids, mask = _non_special(tokenizer, token_ids)
    keep = tf.logical_and(mask, tf.cast(padding_mask, tf.bool))
    return tf.ragged.boolean_mask(ids, keep)
