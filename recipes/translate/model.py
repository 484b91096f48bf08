"""Tokenization, the Synthesizer encoder-decoder, its loss and schedule.

TensorFlow backend only (tf.data, tensorflow-text's WordPiece).
"""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
from recipes.core import training
from recipes.core import vocabulary

try:
    import keras_hub as keras_nlp
except ImportError:  # pragma: no cover
    import keras_nlp

PAD_ID = 0

# Detokenization: WordPiece splits punctuation off words ("man , in a
# t - shirt ."); these rules join it back the way English and German text
# is written, so that BLEU/chrF compare against the raw references. They are
# RE2 patterns run by `tf.strings.regex_replace`, inside the SavedModel too.
DETOKENIZE_RULES = (
    (r" ([.,!?;:%)\]}])", r"\1"),  # no space before closing punctuation
    (r"([(\[{$]) ", r"\1"),  # nor after opening brackets
    (r" ?([-/']) ?", r"\1"),  # t - shirt, man ' s, and / or
    (r"^ +| +$", ""),
)


def detokenize_text(strings):
    """Applies `DETOKENIZE_RULES` to a string tensor."""
    for pattern, rewrite in DETOKENIZE_RULES:
        strings = tf.strings.regex_replace(strings, pattern, rewrite)
    return strings


def _ragged(ids):
    """keras-hub tokenizers return Python lists when called eagerly and
    ragged tensors in graphs; this returns a `tf.RaggedTensor` in both."""
    if isinstance(ids, tf.RaggedTensor):
        return ids
    if isinstance(ids, tf.Tensor):
        return tf.RaggedTensor.from_tensor(ids)
    return tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)


class Preprocessor:
    """WordPiece tokenization of source and target sentences.

    Token ids: `[PAD]` is 0 (padding); target sequences start with `[CLS]`
    (beginning of sentence, `bos_id`) and end with `[SEP]` (`eos_id`).

    Args:
        src_vocab: the source vocabulary (list of tokens).
        tgt_vocab: the target vocabulary; the same list when shared.
        max_length: the longest encoder or decoder sequence.
        lowercase: whether the tokenizers lowercase (the vocabularies must
            have been learned the same way).
    """

    def __init__(self, src_vocab, tgt_vocab, max_length, lowercase=False):
        self.src_vocab = list(src_vocab)
        self.tgt_vocab = list(tgt_vocab)
        self.shared = self.src_vocab == self.tgt_vocab
        self.max_length = max_length
        self.lowercase = lowercase
        self.src_tokenizer = vocabulary.wordpiece_tokenizer(src_vocab,
                                                            lowercase)
        self.tgt_tokenizer = (
            self.src_tokenizer if self.shared
            else vocabulary.wordpiece_tokenizer(tgt_vocab, lowercase)
        )
        self.bos_id = self.tgt_vocab.index(vocabulary.CLS)
        self.eos_id = self.tgt_vocab.index(vocabulary.SEP)

    def tokenize_source(self, strings):
        """Ragged `(batch, None)` int32 ids of the source sentences."""
        return _ragged(self.src_tokenizer(strings))

    def tokenize_target(self, strings):
        return _ragged(self.tgt_tokenizer(strings))

    def encoder_inputs(self, strings):
        """Dense `(batch, length)` source ids, length <= max_length, and a
        boolean `(batch,)` telling which sources were longer (and cut)."""
        ids = self.tokenize_source(strings)
        lengths = ids.row_lengths()
        truncated = lengths > self.max_length
        ids = ids[:, : self.max_length]
        return ids.to_tensor(default_value=PAD_ID), truncated

    def detokenize(self, token_ids):
        """Target ids `(batch, length)` (from `[CLS]`) to sentences: stops
        at `[SEP]`, drops special tokens and joins WordPieces and
        punctuation."""
        token_ids = tf.convert_to_tensor(token_ids)
        ended = tf.cumsum(
            tf.cast(tf.equal(token_ids, self.eos_id), tf.int32), axis=1
        ) > 0
        keep = (~ended) & tf.not_equal(token_ids, PAD_ID) & tf.not_equal(
            token_ids, self.bos_id
        )
        ragged = tf.ragged.boolean_mask(token_ids, keep)
        text = self.tgt_tokenizer.detokenize(ragged)
        return detokenize_text(text)


def encode_corpus(preprocessor, parallel):
    """Tokenizes a `data.Parallel` split into padded NumPy arrays.

    Returns a dict with `src` `(n, max_length)`, `tgt_in` (`[CLS]` + target)
    and `tgt_out` (target + `[SEP]`), both `(n, max_length)`, and `kept`, the
    number of pairs that fit; pairs whose source is longer than
    `max_length`, or whose target is longer than `max_length - 1`, are
    dropped (`dropped` says how many) and never cut.
    """
    length = preprocessor.max_length
    src = preprocessor.tokenize_source(tf.constant(parallel.src))
    tgt = preprocessor.tokenize_target(tf.constant(parallel.tgt))
    src_len = src.row_lengths().numpy()
    tgt_len = tgt.row_lengths().numpy()
    fits = (src_len <= length) & (tgt_len + 1 <= length) & (src_len > 0) & (
        tgt_len > 0)
    index = np.nonzero(fits)[0]
    src = tf.gather(src, index)
    tgt = tf.gather(tgt, index)
    n = len(index)
    bos = tf.fill([n, 1], preprocessor.bos_id)
    eos = tf.fill([n, 1], preprocessor.eos_id)
    shape = [n, length]
    return {
        "src": src.to_tensor(PAD_ID, shape=shape).numpy(),
        "tgt_in": tf.concat([bos, tgt], axis=1).to_tensor(
            PAD_ID, shape=shape).numpy(),
        "tgt_out": tf.concat([tgt, eos], axis=1).to_tensor(
            PAD_ID, shape=shape).numpy(),
        "kept": n,
        "dropped": int(len(fits) - n),
        "empty": int(np.sum((src_len == 0) | (tgt_len == 0))),
        "src_tokens": int(src_len[index].sum()),
        "tgt_tokens": int(tgt_len[index].sum() + n),
    }


def make_dataset(encoded, batch_size, shuffle=False, seed=0,
                 drop_remainder=False, static_shapes=False, epochs=None,
                 initial_epoch=0):
    """`((inputs, labels, weights))` batches for `Model.fit/evaluate`.

    Batches are cut to their longest sequence unless `static_shapes`
    (XLA, TPU), which keeps every batch `(batch, max_length)`. With
    `shuffle` and `epochs`: the batches of epochs `initial_epoch ..
    epochs - 1` in one stream, each epoch's order fixed by `(seed, epoch)`
    (`training.shuffled_epochs`), so that a resumed run sees the batches an
    uninterrupted one sees.
    """
    dataset = tf.data.Dataset.from_tensor_slices(
        (encoded["src"], encoded["tgt_in"], encoded["tgt_out"])
    )
    if shuffle and epochs is not None:
        dataset = training.shuffled_epochs(
            dataset, len(encoded["src"]), batch_size, seed, epochs,
            initial_epoch, drop_remainder=drop_remainder)
    else:
        if shuffle:
            dataset = dataset.shuffle(len(encoded["src"]), seed=seed,
                                      reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

    def to_inputs(src, tgt_in, tgt_out):
        if not static_shapes:
            src_len = tf.reduce_max(tf.reduce_sum(
                tf.cast(src != PAD_ID, tf.int32), axis=1))
            tgt_len = tf.reduce_max(tf.reduce_sum(
                tf.cast(tgt_in != PAD_ID, tf.int32), axis=1))
            src, tgt_in, tgt_out = (src[:, :src_len], tgt_in[:, :tgt_len],
                                    tgt_out[:, :tgt_len])
        inputs = {"encoder_token_ids": src, "decoder_token_ids": tgt_in}
        weights = tf.cast(tgt_out != PAD_ID, tf.float32)
        return inputs, tgt_out, weights

    return dataset.map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE
                       ).prefetch(tf.data.AUTOTUNE)


# ------------------------------------------------------------------ model


@keras.saving.register_keras_serializable(package="recipes.translate")
class SynthesizerTranslator(keras.Model):
    """Encoder-decoder Transformer of `SynthesizerEncoder`/`Decoder` blocks.

    Token embeddings (scaled by sqrt(hidden_dim)) plus learned positions;
    the target embedding is tied to the output projection, and with a
    shared vocabulary one embedding serves source, target and output.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        max_length: the longest encoder and decoder sequence (the
            synthesizers' `max_length`).
        synthesizer: self-attention variant of every block (causal in the
            decoder).
        cross_attention_synthesizer: variant of the decoder's
            cross-attention. Defaults to `"vanilla"`, as in the paper.
        hidden_dim, num_layers, num_heads, intermediate_dim, dropout:
            sizes; `num_layers` blocks in the encoder and in the decoder.
        share_embeddings: one embedding for both languages (needs equal
            vocabulary sizes: a shared vocabulary).
        normalize_first: pre-LN blocks (with a final LayerNorm) instead of
            post-LN.
        factorized_rank: rank of `"factorized_random"`.

    Call arguments:
        inputs: dict with `encoder_token_ids` `(batch, S)` and
            `decoder_token_ids` `(batch, T)` (int, 0 = padding).

    Returns:
        float32 logits `(batch, T, tgt_vocab_size)`.
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, max_length,
                 synthesizer="random+vanilla",
                 cross_attention_synthesizer="vanilla", hidden_dim=256,
                 num_layers=3, num_heads=4, intermediate_dim=None,
                 dropout=0.1, share_embeddings=True, normalize_first=False,
                 factorized_rank=8, **kwargs):
        super().__init__(**kwargs)
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "`share_embeddings=True` needs one vocabulary for both "
                f"languages. Received: src_vocab_size={src_vocab_size}, "
                f"tgt_vocab_size={tgt_vocab_size}"
            )
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.max_length = max_length
        self.synthesizer = synthesizer
        self.cross_attention_synthesizer = cross_attention_synthesizer
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim or 4 * hidden_dim
        self.dropout = dropout
        self.share_embeddings = share_embeddings
        self.normalize_first = normalize_first
        self.factorized_rank = factorized_rank

        initializer = keras.initializers.RandomNormal(
            stddev=hidden_dim ** -0.5)
        self.tgt_embedding = keras.layers.ReversibleEmbedding(
            tgt_vocab_size, hidden_dim, tie_weights=True,
            embeddings_initializer=initializer, name="tgt_embedding")
        self.src_embedding = (
            self.tgt_embedding if share_embeddings
            else keras.layers.Embedding(
                src_vocab_size, hidden_dim,
                embeddings_initializer=initializer, name="src_embedding")
        )
        self.src_position = keras_nlp.layers.PositionEmbedding(
            max_length, name="src_position")
        self.tgt_position = keras_nlp.layers.PositionEmbedding(
            max_length, name="tgt_position")
        self.src_dropout = keras.layers.Dropout(dropout)
        self.tgt_dropout = keras.layers.Dropout(dropout)
        block = dict(
            intermediate_dim=self.intermediate_dim, num_heads=num_heads,
            dropout=dropout, normalize_first=normalize_first,
            max_length=max_length, factorized_rank=factorized_rank,
        )
        self.encoder_blocks = [
            SynthesizerEncoder(synthesizer=synthesizer, name=f"encoder_{i}",
                               **block)
            for i in range(num_layers)
        ]
        self.decoder_blocks = [
            SynthesizerDecoder(
                synthesizer=synthesizer,
                cross_attention_synthesizer=cross_attention_synthesizer,
                name=f"decoder_{i}", **block)
            for i in range(num_layers)
        ]
        if normalize_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=1e-5, name="encoder_norm")
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=1e-5, name="decoder_norm")

    # ----------------------------------------------------------- pieces

    def _embed(self, embedding, position, dropout, token_ids, start_index=0,
               training=None):
        x = embedding(token_ids) * ops.cast(
            math.sqrt(self.hidden_dim), self.compute_dtype)
        x = x + position(x, start_index=start_index)
        return dropout(x, training=training)

    def encode(self, encoder_token_ids, training=None):
        """Returns the encoder output and its padding mask `(batch, S)`."""
        mask = ops.not_equal(encoder_token_ids, PAD_ID)
        x = self._embed(self.src_embedding, self.src_position,
                        self.src_dropout, encoder_token_ids,
                        training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        if self.normalize_first:
            x = self.encoder_norm(x)
        return x, mask

    def _logits(self, x):
        if self.normalize_first:
            x = self.decoder_norm(x)
        return ops.cast(self.tgt_embedding(x, reverse=True), "float32")

    def decode(self, decoder_token_ids, encoder_output, encoder_mask,
               training=None):
        """Full (uncached) causal decoding: logits `(batch, T, vocab)`."""
        x = self._embed(self.tgt_embedding, self.tgt_position,
                        self.tgt_dropout, decoder_token_ids,
                        training=training)
        for block in self.decoder_blocks:
            x = block(x, encoder_output, encoder_padding_mask=encoder_mask,
                      training=training)
        return self._logits(x)

    def call(self, inputs, training=None):
        encoder_output, mask = self.encode(inputs["encoder_token_ids"],
                                           training=training)
        return self.decode(inputs["decoder_token_ids"], encoder_output, mask,
                           training=training)

    # ------------------------------------------------------ cached steps

    def initial_caches(self, batch_size, encoder_length):
        """Empty self- and cross-attention caches of every decoder block
        (their layout depends on the variant, see
        `SynthesizerDecoder.initial_cache`)."""
        dtype = self.compute_dtype
        self_caches = tuple(
            block.initial_cache(batch_size, self.max_length, dtype=dtype)
            for block in self.decoder_blocks)
        cross_caches = tuple(
            block.initial_cross_attention_cache(batch_size, encoder_length,
                                                dtype=dtype)
            for block in self.decoder_blocks)
        return self_caches, cross_caches

    def decode_step(self, token_ids, index, encoder_output, encoder_mask,
                    self_caches, cross_caches, fill_cross_caches=False):
        """Decodes the token at position `index` with the caches.

        Args:
            token_ids: `(batch, 1)` ids of the tokens at `index`.
            index: int scalar (tensor), the position of `token_ids`.
            fill_cross_caches: True on the first step: the cross-attention
                caches are computed from `encoder_output` (then reused).

        Returns:
            `(logits (batch, vocab) for position index + 1, self_caches,
            cross_caches)`.
        """
        x = self._embed(self.tgt_embedding, self.tgt_position,
                        self.tgt_dropout, token_ids, start_index=index,
                        training=False)
        new_self, new_cross = [], []
        for block, self_cache, cross_cache in zip(
                self.decoder_blocks, self_caches, cross_caches):
            x, self_cache, cross_cache = block(
                x, encoder_output, encoder_padding_mask=encoder_mask,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=(
                    0 if fill_cross_caches else None),
                training=False,
            )
            new_self.append(self_cache)
            new_cross.append(cross_cache)
        return self._logits(x)[:, 0], tuple(new_self), tuple(new_cross)

    def build_for(self, batch_size=2, length=None):
        """Builds every weight by calling the model on a dummy batch."""
        length = length or min(4, self.max_length)
        ids = ops.ones((batch_size, length), "int32")
        self({"encoder_token_ids": ids, "decoder_token_ids": ids})

    def get_config(self):
        config = super().get_config()
        config.update({
            "src_vocab_size": self.src_vocab_size,
            "tgt_vocab_size": self.tgt_vocab_size,
            "max_length": self.max_length,
            "synthesizer": self.synthesizer,
            "cross_attention_synthesizer": self.cross_attention_synthesizer,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "share_embeddings": self.share_embeddings,
            "normalize_first": self.normalize_first,
            "factorized_rank": self.factorized_rank,
        })
        return config


# ------------------------------------------------------ loss and schedule


@keras.saving.register_keras_serializable(package="recipes.translate")
class SmoothedCrossEntropy(keras.losses.Loss):
    """Token cross-entropy with label smoothing, from logits.

    The smoothed target puts `1 - label_smoothing` on the reference token
    and spreads `label_smoothing` uniformly over the vocabulary. Pass the
    padding mask as `sample_weight`: the loss is averaged over real tokens
    (`reduction="mean_with_sample_weight"`).
    """

    def __init__(self, label_smoothing=0.1, name="smoothed_cross_entropy",
                 reduction="mean_with_sample_weight", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        y_true = ops.cast(y_true, "int32")
        nll = -ops.squeeze(
            ops.take_along_axis(log_probs, y_true[..., None], axis=-1), -1)
        if not self.label_smoothing:
            return nll
        uniform = -ops.mean(log_probs, axis=-1)
        return (1.0 - self.label_smoothing) * nll + (
            self.label_smoothing * uniform)

    def get_config(self):
        config = super().get_config()
        config["label_smoothing"] = self.label_smoothing
        return config


@keras.saving.register_keras_serializable(package="recipes.translate")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's schedule: linear warmup to `peak` over
    `warmup_steps`, then decay as `peak * sqrt(warmup_steps / step)`."""

    def __init__(self, peak, warmup_steps):
        self.peak = float(peak)
        self.warmup_steps = int(max(1, warmup_steps))

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.peak * ops.minimum(step / warmup,
                                       ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


def compile_model(model, learning_rate, warmup_steps, label_smoothing=0.1,
                  weight_decay=0.0, jit_compile=False, ema_momentum=None):
    """Adam(0.9, 0.98, 1e-9) as in the paper (AdamW when `weight_decay`),
    with a moving average of the weights when `ema_momentum` is given;
    under `mixed_float16`, `compile` adds dynamic loss scaling."""
    schedule = InverseSqrtSchedule(learning_rate, warmup_steps)
    options = dict(learning_rate=schedule, beta_1=0.9, beta_2=0.98,
                   epsilon=1e-9, **training.ema_options(ema_momentum))
    optimizer = (keras.optimizers.AdamW(weight_decay=weight_decay, **options)
                 if weight_decay else keras.optimizers.Adam(**options))
    model.compile(
        optimizer=optimizer,
        loss=SmoothedCrossEntropy(label_smoothing),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(
            name="token_accuracy")],
        jit_compile=jit_compile,
    )
    return model
