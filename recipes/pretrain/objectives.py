"""The two pretraining objectives on `keras_synth.models` (TensorFlow).

- `mlm`: `SynthesizerMaskedLM` on a `SynthesizerBackbone`; each window is
  `[CLS] tokens [SEP]`, masked by `bert_mask` (BERT's 15% selection,
  80/10/10 replacement, as `SynthesizerMaskedLMPreprocessor` masks
  strings), anew each time a window is seen (dynamic masking), from the
  run's seed and the batch number (a resumed run masks as an
  uninterrupted one).
- `span_corruption`: `SynthesizerSeq2SeqLM` on a
  `SynthesizerSeq2SeqBackbone`; each window is corrupted by
  `SynthesizerSpanCorruptionPreprocessor` (T5's spans and sentinels).

Both train on batches the recipe packs (token ids, not strings: `fit` runs
without the preprocessor) and keep the preprocessor in the preset, so that
the saved model takes raw strings. The held-out windows are masked or
corrupted once, with the run's seed, so every variant is scored on the same
targets.
"""

import math

import keras
import numpy as np
import tensorflow as tf

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerMaskedLM
from keras_synth.models import SynthesizerMaskedLMPreprocessor
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSpanCorruptionPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import span_corruption_text_length
from recipes.core import flags
from recipes.core import training
from recipes.core import vocabulary
from recipes.core.data_files import DataError
from recipes.lm import tokenizers as lm_tokenizers


def make_tokenizer(vocab, lowercase=True):
    return SynthesizerTokenizer(vocabulary=list(vocab), lowercase=lowercase)


def encode(tokenizer, lines):
    """Token ids of each line (a list of int32 arrays)."""
    return lm_tokenizers.encode_documents(tokenizer, lines)


def count_unknown(tokenizer, documents):
    return sum(lm_tokenizers.count_unknown(tokenizer, ids)
               for ids in documents)


def compile_model(model, args, total_steps, steps_per_execution=1):
    """The recipes' AdamW (global-norm clipping after the all-reduce, no
    decay of biases and norms) with warmup and cosine decay; cross-entropy
    over the predicted positions only (the sample weights), with the
    weighted accuracy and loss as metrics."""
    schedule = training.learning_rate_schedule(
        args.learning_rate, total_steps, args.warmup_fraction)
    optimizer = training.adamw(schedule, args.weight_decay,
                               ema_momentum=args.ema_momentum)
    model.compile(
        optimizer=optimizer,
        # The mean over the predicted positions (not over every slot).
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"),
        weighted_metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseCategoricalCrossentropy(
                from_logits=True, name="token_loss")],
        jit_compile=flags.keras_jit_compile(args),
        steps_per_execution=steps_per_execution)


def batches_of_windows(windows, lengths, batch_size, seed, steps_per_epoch,
                       initial_epoch):
    """Batches of `(windows, lengths)` rows: one seeded permutation of all
    rows after another (pass `p` drawn from `(seed, p)`), batched without
    a remainder across passes, `steps_per_epoch` batches an epoch, from
    epoch `initial_epoch` on: every row is seen once a pass, and a
    resumed run sees the batches an uninterrupted one sees."""
    count = len(windows)
    windows = tf.constant(windows, tf.int32)
    lengths = tf.constant(lengths, tf.int32)

    def one_pass(index):
        return tf.data.Dataset.from_tensor_slices(tf.argsort(
            tf.random.stateless_uniform([count], tf.stack(
                [tf.constant(seed, tf.int64), index]))))

    rows = tf.data.Dataset.range(2**62).flat_map(one_pass)
    return rows.batch(batch_size, drop_remainder=True).skip(
        initial_epoch * steps_per_epoch).map(
        lambda order: (tf.gather(windows, order), tf.gather(lengths, order)))


def fixed_batches(dataset):
    """`dataset`'s batches computed once (NumPy), as a dataset: the held-out
    masks are drawn once, not anew at each evaluation."""
    batches = [tf.nest.map_structure(lambda t: t.numpy(), batch)
               for batch in dataset]
    if not batches:
        raise DataError("No held-out windows to score.")

    def gen():
        yield from batches

    spec = tf.nest.map_structure(
        lambda a: tf.TensorSpec((None,) + a.shape[1:], a.dtype), batches[0])
    return tf.data.Dataset.from_generator(gen, output_signature=spec)


def score(model, dataset):
    """Cross-entropy (nats/token) and accuracy over the weighted
    positions of `dataset`'s `(x, y, sample_weight)` batches, summed
    exactly (no per-batch averaging)."""
    total, correct, count = 0.0, 0.0, 0.0
    with training.without_preprocessor(model):
        for x, y, weight in dataset:
            logits = keras.ops.convert_to_numpy(
                model(x, training=False)).astype("float64")
            y, weight = y.numpy(), weight.numpy().astype("float64")
            logits -= logits.max(axis=-1, keepdims=True)
            log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            picked = np.take_along_axis(log_probs, y[..., None], -1)[..., 0]
            total += float(-(picked * weight).sum())
            correct += float(((log_probs.argmax(-1) == y) * weight).sum())
            count += float(weight.sum())
    return {"loss": total / count, "accuracy": correct / count,
            "predicted_tokens": int(count)}


class HeldOutScores(keras.callbacks.Callback):
    """Adds the held-out scores (`score`) to each epoch's logs as
    `val_token_loss` and `val_accuracy` (`history.csv`, TensorBoard)."""

    def __init__(self, dataset):
        super().__init__()
        self.dataset = dataset

    def on_epoch_end(self, epoch, logs=None):
        scores = score(self.model, self.dataset)
        if logs is not None:
            logs["val_token_loss"] = scores["loss"]
            logs["val_accuracy"] = scores["accuracy"]


def bert_mask(token_ids, seed, special_ids, mask_id, vocabulary_size, rate,
              slots):
    """BERT's masking of `token_ids` (`(B, W)` int32), stateless from
    `seed` (two int64s): in each row `ceil(rate x n)` of its `n` selectable
    positions (ids not in `special_ids`), at most `slots`, chosen
    uniformly; 80% of them replaced by `mask_id`, 10% by a uniform token of
    `[0, vocabulary_size)`, 10% kept.

    Returns `(masked_ids, positions, labels, weights)`: the last three
    `(B, slots)`, the chosen positions in increasing order, their original
    ids and 1.0, then zeros."""
    choice_seed, draw_seed, token_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3))
    shape = tf.shape(token_ids)
    width = shape[1]
    selectable = tf.reduce_all(
        token_ids[..., None] != tf.constant(special_ids, tf.int32), -1)
    count = tf.reduce_sum(tf.cast(selectable, tf.float64), 1)
    chosen = tf.minimum(slots, tf.cast(tf.math.ceil(count * rate), tf.int32))
    scores = tf.where(selectable,
                      tf.random.stateless_uniform(shape, choice_seed), 2.0)
    first = tf.argsort(scores, axis=1, stable=True)[:, :slots]
    taken = tf.range(slots)[None, :] < chosen[:, None]
    positions = tf.sort(tf.where(taken, first, width), axis=1)
    taken = positions < width
    positions = tf.where(taken, positions, 0)
    labels = tf.where(taken, tf.gather(token_ids, positions, batch_dims=1), 0)
    draw = tf.random.stateless_uniform(tf.shape(positions), draw_seed)
    random_ids = tf.random.stateless_uniform(
        tf.shape(positions), token_seed, minval=0, maxval=vocabulary_size,
        dtype=tf.int32)
    replaced = tf.where(draw < 0.8, mask_id,
                        tf.where(draw < 0.9, random_ids, labels))
    rows = tf.broadcast_to(tf.range(shape[0])[:, None], tf.shape(positions))
    indices = tf.boolean_mask(tf.stack([rows, positions], -1), taken)
    masked = tf.tensor_scatter_nd_update(token_ids, indices,
                                         tf.boolean_mask(replaced, taken))
    return masked, positions, labels, tf.cast(taken, tf.float32)


class MaskedLanguageModel:
    """`--objective=mlm`."""

    name = "mlm"

    @staticmethod
    def vocabulary_options(args):
        return {}

    @staticmethod
    def reserved_tokens(args):
        return vocabulary.RESERVED_TOKENS

    @staticmethod
    def window_length(args):
        return args.sequence_length - 2  # [CLS] tokens [SEP]

    @staticmethod
    def mask_selection_length(args):
        # Inside tf.data the mask generator predicts ceil(rate x tokens) of a
        # window (eagerly each token with probability rate): one more than
        # that expected count leaves room.
        return min(args.sequence_length - 2, math.ceil(
            args.mask_selection_rate * (args.sequence_length - 2)) + 1)

    def make_preprocessor(self, tokenizer, args):
        return SynthesizerMaskedLMPreprocessor(
            tokenizer, sequence_length=args.sequence_length,
            mask_selection_rate=args.mask_selection_rate,
            mask_selection_length=self.mask_selection_length(args))

    def build_model(self, tokenizer, args):
        backbone = SynthesizerBackbone(
            vocabulary_size=tokenizer.vocabulary_size(),
            num_layers=args.num_layers, num_heads=args.num_heads,
            hidden_dim=args.hidden_dim,
            intermediate_dim=args.intermediate_dim or 4 * args.hidden_dim,
            synthesizer=args.synthesizer,
            max_sequence_length=args.sequence_length,
            num_segments=args.num_segments, dropout=args.dropout,
            synthesizer_options=args.synthesizer_options)
        return SynthesizerMaskedLM(
            backbone, preprocessor=self.make_preprocessor(tokenizer, args))

    def describe(self, args):
        return (f"SynthesizerMaskedLM, {args.num_layers} x "
                f"SynthesizerEncoder({args.synthesizer!r}), width "
                f"{args.hidden_dim}, {args.num_heads} heads, windows of "
                f"{args.sequence_length}")

    def _masked(self, tokenizer, args):
        """`(batch number, (windows, lengths))` to the masked LM's
        `(x, y, w)`: `[CLS] tokens [SEP]` masked by `bert_mask` from
        `(seed, batch number)`, so a resumed run masks as an uninterrupted
        one."""
        special = [tokenizer.token_to_id(t) for t in ("[PAD]", "[CLS]",
                                                      "[SEP]")]
        mask_id = tokenizer.token_to_id("[MASK]")
        slots = self.mask_selection_length(args)

        def mask(number, rows):
            windows, lengths = rows
            batch = tf.shape(windows)[0]
            real = tf.range(tf.shape(windows)[1])[None, :] < lengths[:, None]
            # [CLS] tokens [SEP] padding.
            body = tf.concat([tf.fill([batch, 1], special[1]),
                              tf.where(real, windows, 0),
                              tf.zeros([batch, 1], tf.int32)], 1)
            positions = tf.range(tf.shape(body)[1])[None, :]
            token_ids = tf.where(positions == lengths[:, None] + 1,
                                 special[2], body)
            masked, mask_positions, labels, weights = bert_mask(
                token_ids, tf.stack([tf.constant(args.seed, tf.int64),
                                     number]),
                special, mask_id, tokenizer.vocabulary_size(),
                args.mask_selection_rate, slots)
            x = {"token_ids": masked,
                 "segment_ids": tf.zeros_like(token_ids),
                 "padding_mask": tf.cast(positions <= lengths[:, None] + 1,
                                         tf.int32),
                 "mask_positions": mask_positions}
            return x, labels, weights

        return mask

    def train_dataset(self, tokenizer, rows, args, steps_per_epoch,
                      initial_epoch):
        batches = batches_of_windows(*rows, args.batch_size, args.seed,
                                     steps_per_epoch, initial_epoch)
        return batches.enumerate(start=initial_epoch * steps_per_epoch).map(
            self._masked(tokenizer, args),
            num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def heldout_dataset(self, tokenizer, rows, args):
        """The held-out windows masked once (`fixed_batches`), batch `b`
        from `(seed, b - 2**40)`: every worker of a cluster and every
        variant scores the same targets, none of them a training batch's
        masks."""
        dataset = tf.data.Dataset.from_tensor_slices(
            (rows[0].astype("int32"), rows[1].astype("int32"))).batch(
            args.eval_batch_size).enumerate(start=-(2**40)).map(
            self._masked(tokenizer, args))
        return fixed_batches(dataset)

    @staticmethod
    def fine_tune_hint(path):
        return (f"python -m recipes.glue --preset={path} --task=...; or "
                f"SynthesizerTextClassifier.from_preset({path!r}, "
                "num_classes=N)")


class SpanCorruption:
    """`--objective=span_corruption`."""

    name = "span_corruption"

    @staticmethod
    def vocabulary_options(args):
        return {"num_sentinels": args.num_sentinels}

    @staticmethod
    def reserved_tokens(args):
        return vocabulary.RESERVED_TOKENS

    @staticmethod
    def make_preprocessor(tokenizer, args):
        """Encoder inputs of `--sequence_length`; the decoder length the
        longest window needs; seeded."""
        return SynthesizerSpanCorruptionPreprocessor(
            tokenizer, encoder_sequence_length=args.sequence_length,
            noise_density=args.noise_density,
            mean_noise_span_length=args.mean_noise_span_length,
            seed=args.seed)

    def window_length(self, args):
        # The most tokens whose corruption fits (no start/end tokens: the
        # packers add them).
        return span_corruption_text_length(
            args.sequence_length, None, args.noise_density,
            args.mean_noise_span_length)

    def build_model(self, tokenizer, args):
        preprocessor = self.make_preprocessor(tokenizer, args)
        backbone = SynthesizerSeq2SeqBackbone(
            vocabulary_size=tokenizer.vocabulary_size(),
            num_layers=args.num_layers, num_heads=args.num_heads,
            hidden_dim=args.hidden_dim,
            intermediate_dim=args.intermediate_dim or 4 * args.hidden_dim,
            max_sequence_length=max(args.sequence_length,
                                    preprocessor.decoder_sequence_length),
            synthesizer=args.synthesizer,
            cross_attention_synthesizer=args.cross_attention_synthesizer,
            dropout=args.dropout,
            synthesizer_options=args.synthesizer_options)
        return SynthesizerSeq2SeqLM(backbone, preprocessor=preprocessor)

    def describe(self, args):
        return (f"SynthesizerSeq2SeqLM, {args.num_layers}+{args.num_layers} "
                f"blocks, self-attention {args.synthesizer!r}, "
                f"cross-attention {args.cross_attention_synthesizer!r}, "
                f"width {args.hidden_dim}, {args.num_heads} heads, encoder "
                f"inputs of {args.sequence_length}")

    def _corrupted(self, tokenizer, args):
        """`(batch number, (windows, lengths))` to the seq2seq LM's
        `(x, y, w)`: each window's spans drawn from `(seed, batch number,
        row)`, so a resumed run corrupts as an uninterrupted one."""
        preprocessor = self.make_preprocessor(tokenizer, args)
        preprocessor.build(None)

        def corrupt(number, rows):
            windows, lengths = rows
            token_ids = tf.RaggedTensor.from_tensor(windows, lengths=lengths)
            seeds = tf.random.stateless_uniform(
                [tf.shape(windows)[0], 2],
                tf.stack([tf.constant(args.seed, tf.int64), number]),
                minval=None, maxval=None, dtype=tf.int32)
            inputs, targets = preprocessor.corrupt(token_ids, seeds)
            encoder_ids, encoder_mask = preprocessor.encoder_packer(
                inputs, sequence_length=preprocessor.encoder_sequence_length)
            decoder_ids, decoder_mask = preprocessor.decoder_packer(
                targets,
                sequence_length=preprocessor.decoder_sequence_length + 1)
            x = {
                "encoder_token_ids": tf.cast(encoder_ids, tf.int32),
                "encoder_padding_mask": tf.cast(encoder_mask, tf.int32),
                "decoder_token_ids": tf.cast(decoder_ids[:, :-1], tf.int32),
                "decoder_padding_mask": tf.cast(decoder_mask[:, :-1],
                                                tf.int32),
            }
            return (x, tf.cast(decoder_ids[:, 1:], tf.int32),
                    tf.cast(decoder_mask[:, 1:], tf.float32))

        return corrupt

    def train_dataset(self, tokenizer, rows, args, steps_per_epoch,
                      initial_epoch):
        batches = batches_of_windows(*rows, args.batch_size, args.seed,
                                     steps_per_epoch, initial_epoch)
        start = initial_epoch * steps_per_epoch
        return batches.enumerate(start=start).map(
            self._corrupted(tokenizer, args),
            num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def heldout_dataset(self, tokenizer, rows, args):
        dataset = tf.data.Dataset.from_tensor_slices(
            (rows[0].astype("int32"), rows[1].astype("int32"))).batch(
            args.eval_batch_size).enumerate(start=-(2**40)).map(
            self._corrupted(tokenizer, args))
        return fixed_batches(dataset)

    @staticmethod
    def fine_tune_hint(path):
        return (f"python -m recipes.translate --preset={path} --src=.. "
                "--tgt=..")


OBJECTIVES = {"mlm": MaskedLanguageModel(), "span_corruption": SpanCorruption()}


def get(name):
    return OBJECTIVES[name]
