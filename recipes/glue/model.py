"""The GLUE model (a `keras_synth.models.SynthesizerTextClassifier`) and its
tf.data pipeline (TensorFlow backend)."""

import keras
import numpy as np
import tensorflow as tf

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer
from recipes.core import lengths
from recipes.core import training


def make_preprocessor(vocab, sequence_length, lowercase=True):
    """The classifier's preprocessor: WordPiece over `vocab`, one or two
    segments packed `[CLS] a [SEP] (b [SEP])` to `sequence_length`
    (round-robin truncation), with segment ids and a padding mask."""
    return SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(vocabulary=list(vocab), lowercase=lowercase),
        sequence_length=sequence_length,
    )


def pack(preprocessor, texts):
    """`texts`: a tuple of one or two string tensors `(B,)`; returns the
    model's int32 inputs. (int32, not bool: Keras' distributed symbolic
    build averages a batch over replicas, which bool tensors can't.)"""
    inputs = preprocessor(x=tuple(texts))
    return {key: tf.cast(value, "int32") for key, value in inputs.items()}


def tokens(preprocessor, token_ids):
    """Token strings of one example's ids (for plots)."""
    return [preprocessor.tokenizer.id_to_token(int(i)) for i in token_ids]


def trim_batch(inputs, bucket_up_to=None):
    """Cuts a packed batch to its longest sequence (drops all-padding
    columns), so short sentences don't pay for `max_length`; with
    `bucket_up_to=max_length`, to the next of
    `lengths.bucket_lengths(max_length)` (a few shapes, for JAX)."""
    length = tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=1))
    if bucket_up_to:
        length = lengths.bucketed_length(length, bucket_up_to)
    return {key: value[:, :length] for key, value in inputs.items()}


def drop_tokens(inputs, rate, seed, special_ids, sequence_length=None):
    """Token dropout (word dropout as in Iyyer et al., 2015): each token
    other than `[CLS]`/`[SEP]`/padding leaves the padding mask with
    probability `rate`, so that attention and pooling skip it; the
    positions of the others stay. `seed`: a stateless seed `(2,)`;
    `special_ids`: the ids never dropped.

    The draws are made for `(batch, sequence_length)` (the packed length;
    default: the batch's own) and cut to the batch's columns, so that a
    batch cut to its longest sequence, padded up to a bucket or to
    `sequence_length` drops the same tokens: every padding mode (and so
    every backend) trains on the same inputs."""
    token_ids, mask = inputs["token_ids"], inputs["padding_mask"]
    special = tf.reduce_any(tf.equal(
        token_ids[..., None], tf.constant(special_ids, token_ids.dtype)),
        axis=-1)
    shape = tf.shape(token_ids)
    if sequence_length is not None:
        shape = tf.stack([shape[0], sequence_length])
    draws = tf.random.stateless_uniform(shape, seed)[:, :tf.shape(token_ids)[1]]
    keep = draws >= rate
    mask = mask * tf.cast(keep | special, mask.dtype)
    return dict(inputs, padding_mask=mask)


def make_dataset(split, preprocessor, batch_size, task, shuffle=False,
                 seed=0, labeled=True, drop_remainder=False, trim=False,
                 epochs=None, initial_epoch=0, token_dropout=0.0,
                 bucketed=False):
    """A batched `tf.data.Dataset` of `(inputs, labels)` (or `inputs`).

    With `trim=True` each batch is cut to its longest sequence (dynamic
    shapes; not for XLA or TPUs), with `bucketed` too to the next of a few
    lengths (`trim_batch`); else batches are `(batch_size,
    sequence_length)`, the batch size static too with `drop_remainder`.
    With `shuffle` and `epochs`, the batches of epochs `initial_epoch ..
    epochs - 1` in one stream, each epoch's order fixed by `(seed, epoch)`
    (`training.shuffled_epochs`), so that a resumed run sees the same
    batches as an uninterrupted one; `token_dropout`
    (training streams only) then drops tokens with a seed derived from
    `(seed, batch number)`, so that a resumed run drops the same ones (and
    the same whatever the padding, `drop_tokens`).
    """
    if token_dropout and not (shuffle and epochs is not None):
        raise ValueError("`token_dropout` is for training streams (with "
                         "`shuffle` and `epochs`).")
    tokenizer = preprocessor.tokenizer
    special_ids = [tokenizer.start_token_id, tokenizer.end_token_id]

    def prepare(texts, index=None):
        inputs = pack(preprocessor, texts)
        if trim:
            inputs = trim_batch(
                inputs, preprocessor.sequence_length if bucketed else None)
        elif drop_remainder:  # static shapes: (batch_size, sequence_length)
            inputs = {name: tf.ensure_shape(
                value, [batch_size] + value.shape.as_list()[1:])
                for name, value in inputs.items()}
        if index is not None:
            inputs = drop_tokens(inputs, token_dropout,
                                 tf.stack([seed, index]), special_ids,
                                 preprocessor.sequence_length)
        return inputs

    columns = tuple(
        tf.constant(split.column(i), dtype=tf.string)
        for i in range(task.num_segments)
    )
    if labeled:
        dtype = np.float32 if task.is_regression else np.int32
        labels = tf.constant(np.asarray(split.labels, dtype=dtype))
        dataset = tf.data.Dataset.from_tensor_slices((columns, labels))
    else:
        dataset = tf.data.Dataset.from_tensor_slices(columns)
    if shuffle and epochs is not None:
        dataset = training.shuffled_epochs(
            dataset, len(split), batch_size, seed, epochs, initial_epoch,
            drop_remainder=drop_remainder)
    else:
        if shuffle:
            dataset = dataset.shuffle(
                len(split), seed=seed, reshuffle_each_iteration=True
            )
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if labeled and token_dropout:
        # Batch numbers continue across a resume (whole epochs).
        per_epoch = (len(split) // batch_size if drop_remainder
                     else -(-len(split) // batch_size))
        start = initial_epoch * per_epoch
        dataset = dataset.enumerate(start=start).map(
            lambda i, xy: (prepare(xy[0], tf.cast(i, tf.int32)), xy[1]),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    elif labeled:
        dataset = dataset.map(
            lambda x, y: (prepare(x), y),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    else:
        dataset = dataset.map(
            lambda *x: prepare(x), num_parallel_calls=tf.data.AUTOTUNE
        )
    return dataset.prefetch(tf.data.AUTOTUNE)


def build_model(
    vocab_size,
    num_classes,
    num_segments,
    sequence_length,
    synthesizer="vanilla",
    hidden_dim=128,
    num_layers=2,
    num_heads=4,
    intermediate_dim=None,
    dropout=0.1,
    pooling="mean",
    preset=None,
    name="glue_synthesizer",
    backbone_class=None,
    backbone_options=None,
    **synthesizer_kwargs,
):
    """Builds the classifier (or regressor) and an attention probe.

    A `SynthesizerTextClassifier` on a `SynthesizerBackbone` (tokens +
    positions, + segments for pairs; `num_layers` `SynthesizerEncoder`
    blocks; `"mean"` or `"cls"` pooling), without a preprocessor: it takes
    the packed int32 inputs of `make_dataset` (`L <= sequence_length`).
    Attach the preprocessor for raw strings (`export.export_saved_model`).
    With `preset` (a preset folder), the backbone and its weights are the
    preset's (its architecture, with this `dropout` and `pooling`); the
    head is new. `backbone_class` (default `SynthesizerBackbone`) and its
    extra arguments `backbone_options` build another backbone from the same
    arguments (`recipes.lra.linformer.LinformerBackbone`: only the
    attention differs).

    Returns:
        `(model, probe)`: `model` maps `{"token_ids", "segment_ids",
        "padding_mask"}` to logits `(B, num_classes)`; `probe`, a function
        of the same inputs (same weights), returns the list of attention
        scores `(B, H, L, L)` (NumPy) of each block.
    """
    if pooling not in ("mean", "cls"):
        raise ValueError(
            f"Unknown pooling {pooling!r} (argument `--pooling`). Expected "
            "one of ('mean', 'cls')."
        )
    if preset is not None:
        backbone = SynthesizerBackbone.from_preset(
            preset, dropout=dropout, pooling=pooling)
        if backbone.vocabulary_size != vocab_size:
            raise ValueError(
                f"The preset {preset}'s backbone embeds "
                f"{backbone.vocabulary_size} tokens; its vocabulary holds "
                f"{vocab_size}.")
    else:
        backbone = _new_backbone(vocab_size, num_segments, sequence_length,
                                 synthesizer, hidden_dim, num_layers,
                                 num_heads, intermediate_dim, dropout,
                                 pooling, synthesizer_kwargs,
                                 backbone_class, backbone_options)
    model = SynthesizerTextClassifier(backbone, num_classes=num_classes,
                                      dropout=dropout, name=name)

    def probe(inputs):
        """Attention scores `(B, H, L, L)` of each block, eagerly."""
        return [keras.ops.convert_to_numpy(s)
                for s in backbone.attention_scores(inputs)]

    return model, probe


def _new_backbone(vocab_size, num_segments, sequence_length, synthesizer,
                  hidden_dim, num_layers, num_heads, intermediate_dim,
                  dropout, pooling, synthesizer_kwargs, backbone_class=None,
                  backbone_options=None):
    return (backbone_class or SynthesizerBackbone)(
        vocabulary_size=vocab_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim or 4 * hidden_dim,
        synthesizer=synthesizer,
        max_sequence_length=sequence_length,
        num_segments=num_segments,
        pooling=pooling,
        dropout=dropout,
        **synthesizer_kwargs,
        **(backbone_options or {}),
    )


# LoRA targets the recipe adds to the backbone's defaults: the token
# embedding, where SST-2 fine-tuning of a small preset learns most (the
# sweep of docs/lora_quantization.md).
LORA_EXTRA_TARGETS = ("token_embedding",)


def enable_lora(backbone, rank, target_layer_names=None):
    """`backbone.enable_lora(rank, target_layer_names)` after checking that
    each name is a layer of the backbone that takes LoRA; returns the
    names adapted. Default: the backbone's `default_lora_layer_names()`
    and `LORA_EXTRA_TARGETS`."""
    names = list(target_layer_names or (
        list(backbone.default_lora_layer_names()) + list(LORA_EXTRA_TARGETS)))
    available = sorted({layer.name for layer in backbone._flatten_layers(
        include_self=False) if hasattr(layer, "enable_lora") and layer.weights})
    unknown = [name for name in names if name not in available]
    if unknown:
        raise ValueError(
            f"Argument `--lora_targets`={','.join(names)} names "
            f"{', '.join(unknown)}: not a layer of this backbone that takes "
            f"LoRA. Expected names among: {', '.join(available)}.")
    backbone.enable_lora(rank, target_layer_names=names)
    return names


def compile_model(model, task, learning_rate, total_steps,
                  warmup_fraction=0.1, weight_decay=0.01, jit_compile=False,
                  ema_momentum=None, steps_per_execution=1):
    """The recipes' AdamW (`training.adamw`: the summed gradient clipped to
    a global norm of 1, no decay of biases and norms, a moving average of
    the weights with `ema_momentum`) with warmup + cosine decay;
    cross-entropy, or the classifier's regression defaults (MSE, MAE) for
    STS-B; `steps_per_execution` training steps per call of the compiled
    step."""
    schedule = training.learning_rate_schedule(
        learning_rate, total_steps, warmup_fraction
    )
    # The gradient of the global batch is clipped (after the all-reduce):
    # the same training on any number of replicas.
    optimizer = training.adamw(schedule, weight_decay,
                               ema_momentum=ema_momentum)
    if task.is_regression:
        # The classifier's own regression defaults (`num_classes=1`): mean
        # squared error, mean absolute error as the metric.
        loss = metrics = "auto"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics,
                  jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    return model


def predictions_from_outputs(task, outputs):
    """Class indices (argmax) or scores from the model's outputs."""
    outputs = np.asarray(outputs)
    if task.is_regression:
        return outputs.reshape(-1)
    return outputs.argmax(axis=-1)
