"""The encoder-decoder recipes' use of
`keras_synth.models.SynthesizerSeq2SeqLM`: its preprocessor, the training
pairs as features, the schedule and compile arguments of the paper's base
setup, and batched translation.

TensorFlow backend only (tf.data, tensorflow-text's WordPiece).
"""

import time

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_synth.models import InverseSqrtSchedule
from keras_synth.models import SmoothedSparseCategoricalCrossentropy
from keras_synth.models import SynthesizerSeq2SeqBackbone
from keras_synth.models import SynthesizerSeq2SeqLM
from keras_synth.models import SynthesizerSeq2SeqLMPreprocessor
from keras_synth.models import SynthesizerTokenizer
from keras_synth.samplers import LengthPenaltyBeamSampler
from recipes.core import lengths
from recipes.core import training

FEATURES = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
            "decoder_padding_mask")


def make_preprocessor(src_vocab, tgt_vocab, max_length, lowercase=False,
                      target_length=None, truncation="warn"):
    """`SynthesizerSeq2SeqLMPreprocessor` over WordPiece vocabularies.

    One tokenizer when the vocabularies are equal (shared), else a source
    tokenizer of its own. Sources are packed `[CLS] ... [SEP]` to
    `max_length`; targets `[CLS] ...` (inputs) and `... [SEP]` (labels), to
    `target_length` (default: `max_length`); `truncation` is the
    preprocessor's (`"allow"` where the caller counts the cuts). The
    target tokenizer detokenizes with `join_punctuation` (BLEU is computed
    against raw text).
    """
    target = SynthesizerTokenizer(
        vocabulary=list(tgt_vocab), lowercase=lowercase,
        join_punctuation=True, dtype="int32")
    source = None
    if list(src_vocab) != list(tgt_vocab):
        source = SynthesizerTokenizer(vocabulary=list(src_vocab),
                                      lowercase=lowercase, dtype="int32")
    return SynthesizerSeq2SeqLMPreprocessor(
        target, encoder_sequence_length=max_length,
        decoder_sequence_length=target_length or max_length,
        encoder_tokenizer=source, truncation=truncation)


def source_tokenizer(preprocessor):
    if preprocessor.encoder_tokenizer is None:
        return preprocessor.tokenizer
    return preprocessor.encoder_tokenizer


def token_lengths(tokenizer, strings):
    """The number of tokens of each string (NumPy int array)."""
    if not len(strings):
        return np.zeros([0], "int64")
    ids = tokenizer(tf.constant(list(strings)))
    if isinstance(ids, tf.RaggedTensor):
        return ids.row_lengths().numpy()
    return np.array([len(row) for row in ids], "int64")


def encode_corpus(preprocessor, parallel, cut=False):
    """A `parallel_data.Parallel` split as padded NumPy features of the model.

    Pairs whose source does not fit `[CLS] source [SEP]` in `max_length`
    tokens, or whose target does not fit `[CLS] target` (and `target
    [SEP]`), are dropped (`dropped` counts them, `empty` those with an empty
    side) and never cut; with `cut` they are kept and cut to the lengths
    (`cut_source`, `cut_target` count them), only pairs with an empty side
    dropped. Returns a dict with the `FEATURES` (int32
    `(kept, max_length)`), `labels` and `weights`, and the counts `kept`,
    `dropped`, `empty`, `src_tokens`, `tgt_tokens` (kept pairs; targets
    with their `[SEP]`).
    """
    src_room = preprocessor.encoder_sequence_length - 2  # [CLS] ... [SEP]
    tgt_room = preprocessor.decoder_sequence_length - 1  # [CLS] ...
    src_len = token_lengths(source_tokenizer(preprocessor), parallel.src)
    tgt_len = token_lengths(preprocessor.tokenizer, parallel.tgt)
    nonempty = (src_len > 0) & (tgt_len > 0)
    src_long, tgt_long = src_len > src_room, tgt_len > tgt_room
    fits = nonempty if cut else nonempty & ~src_long & ~tgt_long
    index = np.nonzero(fits)[0]
    encoded = {
        "kept": len(index),
        "dropped": int(len(fits) - len(index)),
        "empty": int(np.sum(~nonempty)),
        "src_tokens": int(np.minimum(src_len[index], src_room).sum()),
        "tgt_tokens": int(np.minimum(tgt_len[index], tgt_room).sum()
                          + len(index)),
    }
    if cut:
        encoded["cut_source"] = int(np.sum(src_long[index]))
        encoded["cut_target"] = int(np.sum(tgt_long[index]))
    if not len(index):
        return encoded
    x, labels, weights = preprocessor({
        "encoder_text": tf.constant([parallel.src[i] for i in index]),
        "decoder_text": tf.constant([parallel.tgt[i] for i in index]),
    })
    for key in FEATURES:
        # int32, not bool: Keras' distributed symbolic build averages a
        # batch over replicas, which bool tensors can't.
        encoded[key] = ops.convert_to_numpy(x[key]).astype("int32")
    encoded["labels"] = ops.convert_to_numpy(labels).astype("int32")
    encoded["weights"] = ops.convert_to_numpy(weights).astype("float32")
    return encoded


def make_dataset(encoded, batch_size, shuffle=False, seed=0,
                 drop_remainder=False, static_shapes=False, epochs=None,
                 initial_epoch=0, bucketed=False):
    """`(features, labels, weights)` batches for `Model.fit/evaluate`.

    Batches are cut to their longest source and target unless
    `static_shapes` (XLA, TPU), which keeps every batch `(batch,
    max_length)`; with `bucketed` (JAX) the cut lengths are padded up to
    the next of `lengths.bucket_lengths(max_length)` (a few shapes). With `shuffle` and `epochs`: the batches of epochs
    `initial_epoch .. epochs - 1` in one stream, each epoch's order fixed
    by `(seed, epoch)` (`training.shuffled_epochs`), so that a resumed run
    sees the batches an uninterrupted one sees.
    """
    dataset = tf.data.Dataset.from_tensor_slices((
        {key: encoded[key] for key in FEATURES}, encoded["labels"],
        encoded["weights"]))
    if shuffle and epochs is not None:
        dataset = training.shuffled_epochs(
            dataset, encoded["kept"], batch_size, seed, epochs,
            initial_epoch, drop_remainder=drop_remainder)
    else:
        if shuffle:
            dataset = dataset.shuffle(encoded["kept"], seed=seed,
                                      reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

    def trim(x, labels, weights):
        if static_shapes:
            return x, labels, weights
        src = tf.reduce_max(tf.reduce_sum(x["encoder_padding_mask"], 1))
        # The scored positions: the decoder's last input, [SEP], has no
        # label and is cut where it is the longest.
        tgt = tf.reduce_max(tf.reduce_sum(tf.cast(weights, tf.int32), 1))
        if bucketed:
            src = lengths.bucketed_length(
                src, encoded["encoder_padding_mask"].shape[1])
            tgt = lengths.bucketed_length(tgt, encoded["labels"].shape[1])
        x = {key: value[:, : src if key.startswith("encoder") else tgt]
             for key, value in x.items()}
        return x, labels[:, :tgt], weights[:, :tgt]

    return dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def build_lm(src_vocab_size, tgt_vocab_size, max_length, synthesizer,
             cross_attention_synthesizer="vanilla", hidden_dim=256,
             num_layers=3, num_heads=4, intermediate_dim=None, dropout=0.1,
             shared=True, normalize_first=False,
             synthesizer_options=None, preset=None):
    """A `SynthesizerSeq2SeqLM` without preprocessor (the recipe feeds it
    features; attach the preprocessor to generate from strings). With
    `preset` (a preset folder, e.g. of span-corruption pretraining), the
    backbone and its weights are the preset's, with this `dropout`."""
    if preset is not None:
        backbone = SynthesizerSeq2SeqBackbone.from_preset(preset,
                                                          dropout=dropout)
        if backbone.vocabulary_size != tgt_vocab_size:
            raise ValueError(
                f"The preset {preset}'s backbone embeds "
                f"{backbone.vocabulary_size} tokens; its vocabulary holds "
                f"{tgt_vocab_size}.")
        return SynthesizerSeq2SeqLM(backbone, preprocessor=None)
    backbone = SynthesizerSeq2SeqBackbone(
        vocabulary_size=tgt_vocab_size,
        encoder_vocabulary_size=None if shared else src_vocab_size,
        num_layers=num_layers, num_heads=num_heads, hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim or 4 * hidden_dim,
        max_sequence_length=max_length, synthesizer=synthesizer,
        cross_attention_synthesizer=cross_attention_synthesizer,
        dropout=dropout, normalize_first=normalize_first,
        synthesizer_options=synthesizer_options)
    return SynthesizerSeq2SeqLM(backbone, preprocessor=None)


def make_sampler(beam_size, length_penalty):
    """Greedy (keras-hub's) for `beam_size=1`, else beam search with GNMT's
    length penalty."""
    if beam_size == 1:
        return "greedy"
    return LengthPenaltyBeamSampler(num_beams=beam_size,
                                    length_penalty=length_penalty)


def set_sampler(lm, beam_size, length_penalty):
    """Makes `lm.generate` search as `make_sampler` says (as `compile`
    does, without compiling again)."""
    import keras_hub

    lm.sampler = keras_hub.samplers.get(make_sampler(beam_size,
                                                     length_penalty))
    lm.generate_function = None  # (compiled for the former sampler)


def compile_lm(lm, learning_rate, warmup_steps, label_smoothing=0.1,
               weight_decay=0.0, jit_compile=False, ema_momentum=None,
               beam_size=4, length_penalty=0.6, steps_per_execution=1):
    """Adam(0.9, 0.98, 1e-9) as in the paper (AdamW when `weight_decay`)
    on the inverse square root schedule, label-smoothed cross-entropy
    averaged over real tokens, a moving average of the weights when
    `ema_momentum` is given, `steps_per_execution` training steps per call
    of the compiled step, and the decoding sampler; under
    `mixed_float16`, `compile` adds dynamic loss scaling."""
    schedule = InverseSqrtSchedule(learning_rate, warmup_steps)
    options = dict(learning_rate=schedule, beta_1=0.9, beta_2=0.98,
                   epsilon=1e-9, **training.ema_options(ema_momentum))
    optimizer = (keras.optimizers.AdamW(weight_decay=weight_decay, **options)
                 if weight_decay else keras.optimizers.Adam(**options))
    lm.compile(
        optimizer=optimizer,
        loss=SmoothedSparseCategoricalCrossentropy(label_smoothing),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(
            name="token_accuracy")],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
        sampler=make_sampler(beam_size, length_penalty),
    )
    return lm


def translate(lm, sentences, batch_size=64, log=None,
              length_flag="max_length"):
    """Translates a list of strings with `lm.generate` (its preprocessor
    and compiled sampler, cached), in batches of similar source length.

    Returns:
        `(translations, stats)`: a list of str, and a dict with
        `sentences`, `seconds`, `sentences_per_second` and `truncated` (how
        many sources had more tokens than fit and were cut; also logged).
    """
    preprocessor = lm.preprocessor
    lengths = token_lengths(source_tokenizer(preprocessor), sentences)
    order = np.argsort(-lengths, kind="stable")
    outputs = [None] * len(sentences)
    start = time.perf_counter()
    for first in range(0, len(sentences), batch_size):
        rows = order[first: first + batch_size]
        texts = lm.generate([sentences[i] for i in rows])
        for row, text in zip(rows, texts):
            outputs[row] = text
    seconds = time.perf_counter() - start
    room = preprocessor.encoder_sequence_length - 2  # [CLS] ... [SEP]
    truncated = int(np.sum(lengths > room))
    if truncated and log:
        log(f"WARNING: {truncated} of {len(sentences)} sources have more "
            f"than {room} tokens (--{length_flag}="
            f"{preprocessor.encoder_sequence_length} with [CLS] and [SEP]) "
            "and were cut to them before decoding.")
    return outputs, {
        "sentences": len(sentences),
        "seconds": seconds,
        "sentences_per_second": len(sentences) / max(seconds, 1e-9),
        "truncated": truncated,
    }
