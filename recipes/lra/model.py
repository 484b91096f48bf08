"""The LRA classifier, its tf.data pipeline, its attention path and its
exports (TensorFlow backend).

The model is the GLUE recipe's (`recipes.glue.model.build_model`): a
`keras_synth.models.SynthesizerTextClassifier` on a `SynthesizerBackbone`
whose pooled vector is the `[CLS]` token (LRA's `pooling_mode="CLS"`) or
the mean of the unpadded tokens. Every batch is padded to `--max_length`
(static shapes, as LRA's `padded_batch`): the synthesizers take the full
length, and a static length is what the query-blocked path needs.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_synth.layers.attention import query_blocks
from keras_synth.layers.synthesizers import get_synthesizer
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import export_text_classifier
from keras_synth.models.tokenizers.byte_tokenizer import SynthesizerByteTokenizer
from recipes import serving
from recipes.core import flags
from recipes.core import training
from recipes.glue import export as glue_export
from recipes.glue import model as glue_model
from recipes.pretrain import objectives


def inputs_of(token_ids):
    """The backbone's int32 inputs of padded token ids `(B, L)`."""
    token_ids = tf.cast(token_ids, tf.int32)
    return {"token_ids": token_ids,
            "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": tf.cast(token_ids != 0, tf.int32)}


def train_dataset(token_ids, labels, batch_size, seed, steps_per_epoch,
                  initial_epoch):
    """Training batches `(inputs, labels)`: one seeded permutation of the
    examples after another, `steps_per_epoch` batches an epoch, from epoch
    `initial_epoch` on (`recipes.pretrain.objectives.batches_of_windows`:
    a resumed run sees the batches an uninterrupted one sees)."""
    batches = objectives.batches_of_windows(
        token_ids, np.asarray(labels, "int32"), batch_size, seed,
        steps_per_epoch, initial_epoch)
    length = token_ids.shape[1]
    return batches.map(
        lambda ids, y: (inputs_of(tf.ensure_shape(ids, [batch_size, length])),
                        y),
        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def eval_dataset(token_ids, batch_size):
    """Inputs of `token_ids` in order, batched (the last batch smaller)."""
    return tf.data.Dataset.from_tensor_slices(token_ids).batch(
        batch_size).map(inputs_of).prefetch(tf.data.AUTOTUNE)


def accuracy(model, token_ids, labels, batch_size):
    """The fraction of examples whose argmax logit is their label."""
    logits = model.predict(eval_dataset(token_ids, batch_size), verbose=0)
    return float(np.mean(np.argmax(logits, axis=-1) == np.asarray(labels)))


def build_model(args, vocabulary_size, num_classes):
    """`(model, probe)` as `recipes.glue.model.build_model` makes them.

    With `args.attention == "linformer"` the backbone is
    `recipes.lra.linformer.LinformerBackbone` (`projected_length =
    args.linformer_k`) built from the same arguments: the same model but
    for the attention layers.
    """
    backbone = {}
    synthesizer = args.synthesizer
    options = args.synthesizer_options
    if getattr(args, "attention", "synthesizer") == "linformer":
        from recipes.lra import linformer

        backbone = {"backbone_class": linformer.LinformerBackbone,
                    "backbone_options": {
                        "projected_length": args.linformer_k}}
        synthesizer, options = "vanilla", None  # not used by the attention
    return glue_model.build_model(
        vocab_size=vocabulary_size, num_classes=num_classes, num_segments=1,
        sequence_length=args.max_length, synthesizer=synthesizer,
        hidden_dim=args.hidden_dim, num_layers=args.num_layers,
        num_heads=args.num_heads, intermediate_dim=args.intermediate_dim,
        dropout=args.dropout, pooling=args.pooling,
        synthesizer_options=options, name="lra_synthesizer", **backbone)


def compile_model(model, args, total_steps, steps_per_execution):
    """The recipes' AdamW (`training.adamw`) with warmup and cosine decay,
    cross-entropy on the logits, accuracy."""
    schedule = training.learning_rate_schedule(
        args.learning_rate, total_steps, args.warmup_fraction)
    model.compile(
        optimizer=training.adamw(schedule, args.weight_decay,
                                 ema_momentum=args.ema_momentum),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=flags.keras_jit_compile(args),
        steps_per_execution=steps_per_execution)
    return model


def attention_path(synthesizer, dropout, length):
    """Which attention path the training step takes, and why.

    Batch-independent variants (random, fixed random, factorized random
    and their mixtures) share one `(H, T, S)` map over the batch when no
    attention dropout is active (`--dropout=0`); past `2 x
    query_blocks.QUERY_BLOCK` tokens that path runs one block of queries
    at a time, so no `H x T x S` tensor exists at once
    (`keras_synth/layers/attention/query_blocks.py`). Every other variant,
    or any with dropout, keeps `B x H x T x S` probabilities.

    Returns:
        `(name, reason)`: `name` one of `"query_blocked"`,
        `"batch_shared"`, `"general"`.
    """
    dependent = [name for name in parse_synthesizer(synthesizer)
                 if get_synthesizer(name).batch_dependent]
    if dependent:
        return "general", (f"{'+'.join(dependent)}: logits that depend on "
                           "the input, B x H x T x S probabilities")
    if dropout > 0:
        return "general", (f"--dropout={dropout} drops attention "
                           "probabilities per example: B x H x T x S "
                           "(--dropout=0 shares one map over the batch)")
    if query_blocks.query_block_size(length) is not None:
        return "query_blocked", (
            f"one H x T x S map for the batch, {query_blocks.QUERY_BLOCK} "
            "query rows at a time")
    return "batch_shared", (
        "one H x T x S map for the batch; blocks of queries from "
        f"{2 * query_blocks.QUERY_BLOCK + 1} tokens on")


def byte_preprocessor(max_length):
    """The text task's preprocessor for raw strings: `[CLS] bytes [SEP]`
    (`SynthesizerByteTokenizer`), cut to `max_length`, as
    `sequences.byte_sequences` and `sequences.pack` make the rows."""
    return SynthesizerTextClassifierPreprocessor(
        SynthesizerByteTokenizer(), sequence_length=max_length)


def export_text_model(path, model, max_length, class_names):
    """A SavedModel of the text classifier that takes raw strings
    (`sentence`), bytes tokenized inside; returns `path`."""
    model.preprocessor = byte_preprocessor(max_length)
    return serving.write_export(
        path, lambda tmp: export_text_classifier(
            model, tmp, label_names=list(class_names)),
        lambda where: text_export_usage(where, class_names))


def text_export_usage(path, class_names):
    return serving.usage(
        path, "serving_default",
        {"sentence": "string tensor `(batch,)`, raw text (UTF-8 bytes "
         "inside)"},
        {"probabilities": "float32 `(batch, classes)`",
         "label": "int32 `(batch,)`, the class index",
         "label_name": "string `(batch,)`: " + ", ".join(class_names),
         "truncated": "bool `(batch,)`, the text was cut"},
        'sentence=tf.constant(["a fine film ."])')


def export_token_model(path, model, max_length):
    """A SavedModel of the ListOps classifier that takes token ids
    `(batch, max_length)` (`listops.encode`, padded with 0); returns
    `path`."""
    def save(tmp):
        module = tf.Module()
        module.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, max_length],
                                                    tf.int32, "token_ids")])
        def serve(token_ids):
            logits = model(inputs_of(token_ids), training=False)
            return {"probabilities": tf.nn.softmax(logits, axis=-1),
                    "label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

        tf.saved_model.save(module, tmp,
                            signatures={"serving_default": serve})

    return serving.write_export(
        path, save, lambda where: token_export_usage(where, max_length))


def token_export_usage(path, max_length):
    return serving.usage(
        path, "serving_default",
        {"token_ids": f"int32 `(batch, {max_length})`: `[CLS]` (1), the "
         "ListOps tokens (recipes.lra.listops.encode), padding 0"},
        {"probabilities": "float32 `(batch, 10)`",
         "label": "int32 `(batch,)`, the value 0-9"},
        f"token_ids=tf.zeros([1, {max_length}], tf.int32)")


def plot_attention(path, probe, token_ids, labels, title, caption):
    """The attention maps of one example (`token_ids (L,)`, `labels` its
    token strings up to its padding) as `recipes.glue.export` draws
    them."""
    inputs = {name: value.numpy() for name, value in
              inputs_of(token_ids[None]).items()}
    scores = [s[0] for s in probe(inputs)]
    return glue_export.plot_attention(path, scores, labels, title=title,
                                      caption=caption)


__all__ = ["accuracy", "attention_path", "build_model", "byte_preprocessor",
           "compile_model", "eval_dataset", "export_text_model",
           "export_token_model", "inputs_of", "plot_attention",
           "text_export_usage", "token_export_usage", "train_dataset"]
