"""The GLUE model and its tf.data preprocessing (TensorFlow backend)."""

import numpy as np

from recipes import common

common.require_tensorflow_backend()

import keras  # noqa: E402
import keras_hub  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_synth.layers import SynthesizerEncoder  # noqa: E402


POOLINGS = ("mean", "cls")


class GluePreprocessor:
    """Raw strings to model inputs, inside tf.data and the SavedModel.

    WordPiece-tokenizes each segment and packs one or two segments as
    `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (round-robin truncation to
    `sequence_length`), with segment ids and a padding mask.

    Args:
        vocab: the WordPiece vocabulary (list of tokens, `[PAD]` first).
        num_segments: 1 or 2.
        sequence_length: packed length.
        lowercase: whether the tokenizer lowercases.
    """

    def __init__(self, vocab, num_segments, sequence_length, lowercase=True):
        self.vocab = list(vocab)
        self.num_segments = num_segments
        self.sequence_length = sequence_length
        self.tokenizer = common.wordpiece_tokenizer(vocab, lowercase)
        self.packer = keras_hub.layers.MultiSegmentPacker(
            sequence_length=sequence_length,
            start_value=self.vocab.index(common.CLS),
            end_value=self.vocab.index(common.SEP),
            pad_value=0,
            truncate="round_robin",
        )

    def __call__(self, texts):
        """`texts`: a tuple of `num_segments` string tensors of shape (B,)."""
        if len(texts) != self.num_segments:
            raise ValueError(
                f"Expected {self.num_segments} text segment(s), received "
                f"{len(texts)}."
            )
        segments = tuple(self.tokenizer(t) for t in texts)
        token_ids, segment_ids = self.packer(segments)
        token_ids = tf.cast(token_ids, "int32")
        return {
            "token_ids": token_ids,
            "segment_ids": tf.cast(segment_ids, "int32"),
            # int32, not bool: Keras' distributed symbolic build averages
            # a batch over replicas, which bool tensors can't.
            "padding_mask": tf.cast(tf.not_equal(token_ids, 0), "int32"),
        }

    def tokens(self, token_ids):
        """Token strings of one example's ids (for plots)."""
        return [self.vocab[int(i)] for i in token_ids]


def trim_batch(inputs):
    """Cuts a packed batch to its longest sequence (drops all-padding
    columns), so short sentences don't pay for `max_length`."""
    length = tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=1))
    return {key: value[:, :length] for key, value in inputs.items()}


def drop_tokens(inputs, rate, seed, special_ids):
    """Token dropout (word dropout as in Iyyer et al., 2015): each token
    other than `[CLS]`/`[SEP]`/padding leaves the padding mask with
    probability `rate`, so that attention and pooling skip it; the
    positions of the others stay. `seed`: a stateless seed `(2,)`;
    `special_ids`: the ids never dropped."""
    token_ids, mask = inputs["token_ids"], inputs["padding_mask"]
    special = tf.reduce_any(tf.equal(
        token_ids[..., None], tf.constant(special_ids, token_ids.dtype)),
        axis=-1)
    keep = tf.random.stateless_uniform(tf.shape(token_ids), seed) >= rate
    mask = mask * tf.cast(keep | special, mask.dtype)
    return dict(inputs, padding_mask=mask)


def make_dataset(split, preprocessor, batch_size, task, shuffle=False,
                 seed=0, labeled=True, drop_remainder=False, trim=False,
                 epochs=None, initial_epoch=0, token_dropout=0.0):
    """A batched `tf.data.Dataset` of `(inputs, labels)` (or `inputs`).

    With `trim=True` each batch is cut to its longest sequence (dynamic
    shapes; not for TPUs). With `shuffle` and `epochs`, the batches of
    epochs `initial_epoch .. epochs - 1` in one stream, each epoch's order
    fixed by `(seed, epoch)` (`common.shuffled_epochs`), so that a resumed
    run sees the same batches as an uninterrupted one; `token_dropout`
    (training streams only) then drops tokens with a seed derived from
    `(seed, batch number)`, so that a resumed run drops the same ones.
    """
    if token_dropout and not (shuffle and epochs is not None):
        raise ValueError("`token_dropout` is for training streams (with "
                         "`shuffle` and `epochs`).")
    special_ids = [preprocessor.vocab.index(t)
                   for t in (common.CLS, common.SEP)]

    def prepare(texts, index=None):
        inputs = preprocessor(texts)
        inputs = trim_batch(inputs) if trim else inputs
        if index is not None:
            inputs = drop_tokens(inputs, token_dropout,
                                 tf.stack([seed, index]), special_ids)
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
        dataset = common.shuffled_epochs(
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


def make_encoder(hidden_dim, num_heads, intermediate_dim, dropout,
                 synthesizer, max_length, name, **synthesizer_kwargs):
    """One `keras_synth.layers.SynthesizerEncoder` block."""
    if hidden_dim % num_heads:
        raise ValueError(
            f"Argument `--hidden_dim`={hidden_dim} must be divisible by "
            f"`--num_heads`={num_heads}."
        )
    return SynthesizerEncoder(
        intermediate_dim=intermediate_dim,
        num_heads=num_heads,
        dropout=dropout,
        synthesizer=synthesizer,
        max_length=max_length,
        name=name,
        **synthesizer_kwargs,
    )


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
    **synthesizer_kwargs,
):
    """Builds the classifier (or regressor) and an attention probe.

    Embedding (tokens + positions, + segments for pairs), `num_layers`
    `SynthesizerEncoder` blocks, pooling (`"mean"` over non-padding tokens
    or the `"cls"` token), dropout and a dense head (float32 logits).

    Inputs are int32 `(B, L)` with `L <= sequence_length`: token ids,
    segment ids and a padding mask (1 for tokens, 0 for padding).

    Returns:
        `(model, probe)`: `model` maps `{"token_ids", "segment_ids",
        "padding_mask"}` to logits `(B, num_classes)`; `probe`, a function
        of the same inputs (same weights), returns the list of attention
        scores `(B, H, L, L)` (NumPy) of each block.
    """
    if pooling not in POOLINGS:
        raise ValueError(
            f"Unknown pooling {pooling!r} (argument `--pooling`). Expected "
            f"one of {POOLINGS}."
        )
    intermediate_dim = intermediate_dim or 4 * hidden_dim
    # Any length up to `sequence_length` (batches may be trimmed).
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
              "padding_mask": padding_mask}
    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary_size=vocab_size,
        sequence_length=sequence_length,
        embedding_dim=hidden_dim,
        name="embedding",
    )(token_ids)
    if num_segments > 1:
        x = x + keras.layers.Embedding(
            num_segments, hidden_dim, name="segment_embedding"
        )(segment_ids)
    x = keras.layers.LayerNormalization(epsilon=1e-5,
                                        name="embedding_norm")(x)
    embedded = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
    encoders = [
        make_encoder(hidden_dim, num_heads, intermediate_dim, dropout,
                     synthesizer, sequence_length, f"encoder_{i}",
                     **synthesizer_kwargs)
        for i in range(num_layers)
    ]
    x = embedded
    for encoder in encoders:
        x = encoder(x, padding_mask=padding_mask)
    if pooling == "mean":
        pooled = keras.layers.GlobalAveragePooling1D(name="pooling")(
            x, mask=padding_mask
        )
    else:
        pooled = x[:, 0, :]
    pooled = keras.layers.Dropout(dropout, name="head_dropout")(pooled)
    logits = keras.layers.Dense(num_classes, dtype="float32",
                                name="logits")(pooled)
    model = keras.Model(inputs, logits, name="glue_synthesizer")

    embedder = keras.Model(inputs, embedded, name="embedder")

    def probe(inputs):
        """Attention scores `(B, H, L, L)` of each block, eagerly."""
        x = embedder(inputs, training=False)
        scores = []
        for encoder in encoders:
            x, score = encoder(x, padding_mask=inputs["padding_mask"],
                               return_attention_scores=True, training=False)
            scores.append(keras.ops.convert_to_numpy(score))
        return scores

    return model, probe


def compile_model(model, task, learning_rate, total_steps,
                  warmup_fraction=0.1, weight_decay=0.01, jit_compile=False,
                  ema_momentum=None):
    """AdamW with warmup + cosine decay (and a moving average of the weights
    with `ema_momentum`); cross-entropy or MSE (STS-B)."""
    schedule = common.learning_rate_schedule(
        learning_rate, total_steps, warmup_fraction
    )
    optimizer = keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=weight_decay, clipnorm=1.0,
        **common.ema_options(ema_momentum),
    )
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    if task.is_regression:
        loss = keras.losses.MeanSquaredError()
        metrics = [keras.metrics.MeanAbsoluteError(name="mae")]
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics,
                  jit_compile=jit_compile)
    return model


def predictions_from_outputs(task, outputs):
    """Class indices (argmax) or scores from the model's outputs."""
    outputs = np.asarray(outputs)
    if task.is_regression:
        return outputs.reshape(-1)
    return outputs.argmax(axis=-1)
