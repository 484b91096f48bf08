"""Greedy and beam search over a `SynthesizerTranslator`, batched, cached.

The searches are written against a `step` function, so that the same
search runs with the decoder's caches (one token per step, the default) or
without them (the whole prefix re-decoded every step; the tests check both
give the same translations):

    logits, state = step(sequences, index, state)

`sequences` `(N, max_length)` holds the tokens so far (position 0 is
`[CLS]`), `index` is the position of the last token, `logits` `(N, vocab)`
score the token at `index + 1`, and `state` is a nest of tensors whose
leading dimension is `N` (the searches reorder it when beams move).

TensorFlow backend only (tf.while_loop); everything traces into a
`tf.function` and into the exported SavedModel.
"""

import time

import numpy as np
import tensorflow as tf

from recipes.translate.model import PAD_ID

NEG_INF = -1.0e9


def length_penalty_factor(length, alpha):
    """GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def _set_column(sequences, column, tokens):
    """`sequences[..., column] = tokens` for a `(..., L)` int tensor."""
    length = tf.shape(sequences)[-1]
    hit = tf.equal(tf.range(length), column)
    return tf.where(hit, tokens[..., None], sequences)


def greedy_search(step, first_logits, state, bos_id, eos_id, max_length):
    """Greedy decoding.

    Args:
        step: see the module docstring.
        first_logits: `(batch, vocab)` logits of position 1 (after
            `[CLS]`); `state` is the state after that first step.
        bos_id, eos_id: the `[CLS]` and `[SEP]` ids.
        max_length: the decoder length (`[CLS]` included).

    Returns:
        `(batch, max_length)` int32 token ids starting with `bos_id`, padded
        with 0 after `eos_id`.
    """
    batch_size = tf.shape(first_logits)[0]
    sequences = tf.concat([
        tf.fill([batch_size, 1], bos_id),
        tf.zeros([batch_size, max_length - 1], tf.int32)], axis=1)

    def update(sequences, done, index, logits):
        tokens = tf.argmax(logits, axis=-1, output_type=tf.int32)
        tokens = tf.where(done, PAD_ID, tokens)
        sequences = _set_column(sequences, index + 1, tokens)
        return sequences, done | tf.equal(tokens, eos_id)

    done = tf.zeros([batch_size], tf.bool)
    sequences, done = update(sequences, done, 0, first_logits)

    def cond(sequences, done, index, state):
        return tf.logical_not(tf.reduce_all(done))

    def body(sequences, done, index, state):
        logits, new_state = step(sequences, index, state)
        new_sequences, new_done = update(sequences, done, index, logits)
        return _same_shapes((new_sequences, new_done, index + 1, new_state),
                            (sequences, done, index, state))

    sequences, _, _, _ = tf.while_loop(
        cond, body, (sequences, done, tf.constant(1), state),
        maximum_iterations=max_length - 2,
    )
    return sequences


def _same_shapes(new, old):
    """Gives loop variables their static shapes back (reshapes with a
    dynamic batch size lose them)."""
    return tf.nest.map_structure(
        lambda n, o: tf.ensure_shape(n, o.shape), new, old)


def _gather_beams(tensor, indices, batch_size, beam_size):
    """Reorders `(batch * beam, ...)` rows: row (b, k) takes (b, indices[b,
    k]); `indices` is `(batch, new_beam)`."""
    shape = tf.shape(tensor)
    grouped = tf.reshape(tensor, tf.concat(
        [[batch_size, beam_size], shape[1:]], axis=0))
    gathered = tf.gather(grouped, indices, batch_dims=1)
    return tf.reshape(gathered, tf.concat([[-1], shape[1:]], axis=0))


def beam_search(step, first_logits, state, bos_id, eos_id, max_length,
                beam_size=4, length_penalty=0.6):
    """Beam search with a length penalty, as in Tensor2Tensor.

    `beam_size` hypotheses stay alive; each step scores their `2 *
    beam_size` best extensions, moves those that end with `[SEP]` into the
    finished set (scored `log p / ((5 + length) / 6) ** length_penalty`,
    the best `beam_size` kept), and keeps the best others alive. A sentence
    stops when no alive hypothesis can beat its worst finished one.

    Args:
        step, first_logits, bos_id, eos_id, max_length: as `greedy_search`;
            `first_logits` and `state` have one row per sentence (they are
            repeated for the beams here).
        beam_size: int, the number of hypotheses kept.
        length_penalty: alpha (0 ranks by log-probability alone).

    Returns:
        `(batch, max_length)` int32 ids of the best hypothesis.
    """
    k = beam_size
    batch_size = tf.shape(first_logits)[0]
    vocab_size = tf.shape(first_logits)[-1]
    alpha = tf.constant(length_penalty, tf.float32)

    def repeat(x):
        return tf.repeat(x, k, axis=0)

    state = tf.nest.map_structure(repeat, state)
    first_logits = repeat(first_logits)
    sequences = tf.concat([
        tf.fill([batch_size, k, 1], bos_id),
        tf.zeros([batch_size, k, max_length - 1], tf.int32)], axis=2)
    alive_log_probs = tf.tile(
        tf.constant([[0.0] + [NEG_INF] * (k - 1)], tf.float32),
        [batch_size, 1])
    finished = tf.zeros_like(sequences)
    finished_scores = tf.fill([batch_size, k], NEG_INF)

    def update(index, logits, sequences, alive_log_probs, finished,
               finished_scores, state):
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        log_probs = tf.reshape(log_probs, [batch_size, k, vocab_size])
        scores = alive_log_probs[:, :, None] + log_probs
        scores = tf.reshape(scores, [batch_size, k * vocab_size])
        top_scores, top = tf.math.top_k(scores, k=2 * k)
        origin = top // vocab_size
        tokens = top % vocab_size
        candidates = tf.gather(sequences, origin, batch_dims=1)
        candidates = _set_column(candidates, index + 1, tokens)
        is_eos = tf.equal(tokens, eos_id)

        # The best non-finished candidates stay alive.
        alive_scores = tf.where(is_eos, NEG_INF, top_scores)
        alive_log_probs, keep = tf.math.top_k(alive_scores, k=k)
        sequences = tf.gather(candidates, keep, batch_dims=1)
        state = tf.nest.map_structure(
            lambda x: _gather_beams(
                x, tf.gather(origin, keep, batch_dims=1), batch_size, k),
            state)

        # Candidates ending here join the finished set.
        penalty = length_penalty_factor(index + 1, alpha)
        new_scores = tf.where(is_eos, top_scores / penalty, NEG_INF)
        all_finished = tf.concat([finished, candidates], axis=1)
        all_scores = tf.concat([finished_scores, new_scores], axis=1)
        finished_scores, best = tf.math.top_k(all_scores, k=k)
        finished = tf.gather(all_finished, best, batch_dims=1)
        return sequences, alive_log_probs, finished, finished_scores, state

    loop_vars = update(0, first_logits, sequences, alive_log_probs, finished,
                       finished_scores, state)
    max_penalty = length_penalty_factor(max_length - 1, alpha)

    def cond(index, sequences, alive_log_probs, finished, finished_scores,
             state):
        # Log-probabilities only decrease; with alpha >= 0 the best an alive
        # hypothesis can still reach is its log p over the largest penalty.
        best_alive = alive_log_probs[:, 0] / tf.maximum(max_penalty, 1.0)
        worst_finished = finished_scores[:, -1]
        return tf.reduce_any(best_alive > worst_finished)

    def body(index, sequences, alive_log_probs, finished, finished_scores,
             state):
        flat = tf.reshape(sequences, [batch_size * k, max_length])
        logits, new_state = step(flat, index, state)
        outputs = update(index, logits, sequences, alive_log_probs, finished,
                         finished_scores, new_state)
        previous = (sequences, alive_log_probs, finished, finished_scores,
                    state)
        return (index + 1,) + _same_shapes(outputs, previous)

    _, sequences, alive_log_probs, finished, finished_scores, _ = (
        tf.while_loop(cond, body, (tf.constant(1),) + loop_vars,
                      maximum_iterations=max_length - 2))
    # A sentence without a finished hypothesis returns its best alive one.
    has_finished = finished_scores[:, 0] > NEG_INF / 2
    return tf.where(has_finished[:, None], finished[:, 0], sequences[:, 0])


# ---------------------------------------------------------- model glue


def cached_step(model):
    """The `step` of `model` using its decoder caches.

    State: `(encoder_output, encoder_mask, self_caches, cross_caches)`.
    """

    def step(sequences, index, state):
        encoder_output, encoder_mask, self_caches, cross_caches = state
        tokens = tf.gather(sequences, [index], axis=1)
        logits, self_caches, cross_caches = model.decode_step(
            tokens, index, encoder_output, encoder_mask, self_caches,
            cross_caches)
        return logits, (encoder_output, encoder_mask, self_caches,
                        cross_caches)

    return step


def uncached_step(model):
    """The `step` of `model` re-decoding the whole prefix (no caches).

    State: `(encoder_output, encoder_mask)`.
    """

    def step(sequences, index, state):
        encoder_output, encoder_mask = state
        logits = model.decode(sequences[:, : index + 1], encoder_output,
                              encoder_mask, training=False)
        return logits[:, -1], state

    return step


def search(model, encoder_token_ids, bos_id, eos_id, beam_size=1,
           length_penalty=0.6, use_cache=True):
    """Translates a batch of source ids; `(batch, max_length)` target ids.

    `beam_size=1` is greedy decoding. Meant to run inside a `tf.function`
    (see `Translator`).
    """
    # Sources are padded to `max_length`: the caches get static shapes
    # (one trace for every batch; XLA and TPUs need them too).
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    padding = model.max_length - tf.shape(encoder_token_ids)[1]
    encoder_token_ids = tf.ensure_shape(
        tf.pad(encoder_token_ids, [[0, 0], [0, padding]]),
        [None, model.max_length])
    encoder_output, encoder_mask = model.encode(encoder_token_ids,
                                                training=False)
    batch_size = tf.shape(encoder_token_ids)[0]
    bos = tf.fill([batch_size, 1], bos_id)
    if use_cache:
        self_caches, cross_caches = model.initial_caches(
            batch_size, model.max_length)
        first_logits, self_caches, cross_caches = model.decode_step(
            bos, 0, encoder_output, encoder_mask, self_caches, cross_caches,
            fill_cross_caches=True)
        state = (encoder_output, encoder_mask, self_caches, cross_caches)
        step = cached_step(model)
    else:
        first_logits = model.decode(bos, encoder_output, encoder_mask,
                                    training=False)[:, 0]
        state = (encoder_output, encoder_mask)
        step = uncached_step(model)
    if beam_size == 1:
        return greedy_search(step, first_logits, state, bos_id, eos_id,
                             model.max_length)
    return beam_search(step, first_logits, state, bos_id, eos_id,
                       model.max_length, beam_size, length_penalty)


class Translator:
    """Batched translation of strings with a trained model.

    Args:
        model: a built `SynthesizerTranslator`.
        preprocessor: its `model.Preprocessor`.
        beam_size: 1 for greedy decoding, else beam search.
        length_penalty: beam search's alpha.
        use_cache: decode with the decoder caches (default) or without.
    """

    def __init__(self, model, preprocessor, beam_size=4, length_penalty=0.6,
                 use_cache=True):
        if beam_size < 1:
            raise ValueError(f"Argument `--beam_size` must be at least 1. "
                             f"Received: --beam_size={beam_size}")
        self.model = model
        self.preprocessor = preprocessor
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.use_cache = use_cache
        self._search = tf.function(self.search_ids, reduce_retracing=True)

    def search_ids(self, encoder_token_ids):
        return search(self.model, encoder_token_ids,
                      self.preprocessor.bos_id, self.preprocessor.eos_id,
                      self.beam_size, self.length_penalty, self.use_cache)

    def translate_batch(self, sentences):
        """`(translations, truncated)`: string and bool tensors."""
        encoder_ids, truncated = self.preprocessor.encoder_inputs(sentences)
        ids = self.search_ids(encoder_ids)
        return self.preprocessor.detokenize(ids), truncated

    def translate(self, sentences, batch_size=64, log=None):
        """Translates a list of strings, batched by source length.

        Returns:
            `(translations, stats)`: a list of str, and a dict with
            `sentences_per_second`, `seconds` and `truncated` (how many
            sources were longer than `max_length` and cut; also printed).
        """
        preprocessor = self.preprocessor
        lengths = preprocessor.tokenize_source(
            tf.constant(sentences)).row_lengths().numpy()
        order = np.argsort(-lengths, kind="stable")
        outputs = [None] * len(sentences)
        start = time.perf_counter()
        for first in range(0, len(sentences), batch_size):
            rows = order[first: first + batch_size]
            encoder_ids, _ = preprocessor.encoder_inputs(
                tf.constant([sentences[i] for i in rows]))
            ids = self._search(encoder_ids)
            texts = preprocessor.detokenize(ids).numpy()
            for row, text in zip(rows, texts):
                outputs[row] = text.decode("utf-8")
        seconds = time.perf_counter() - start
        truncated = int(np.sum(lengths > preprocessor.max_length))
        if truncated and log:
            log(f"WARNING: {truncated} of {len(sentences)} source sentences "
                f"are longer than --max_length={preprocessor.max_length} "
                "tokens and were cut to it before translation.")
        return outputs, {
            "sentences": len(sentences),
            "seconds": seconds,
            "sentences_per_second": len(sentences) / seconds,
            "truncated": truncated,
            "beam_size": self.beam_size,
        }
