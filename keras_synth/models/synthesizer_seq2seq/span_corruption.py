"""Span corruption (T5's pretraining objective): how many tokens and spans
a text loses, the sequence lengths that fit, and the random noise mask.

T5 (`t5.data.preprocessors.random_spans_noise_mask`, `span_corruption`):
a text of `n` tokens loses `round(n * noise_density)` of them (at least
one, and one is kept), in `round(num_noise / mean_noise_span_length)`
spans (at least one). The text is cut into alternating kept and dropped
spans, kept first and dropped last, each of at least one token, the
lengths of each kind a uniformly random composition of its count. The
encoder input is the text with each dropped span replaced by one sentinel
token (sentinel 0, 1, 2, ... in order); the targets list each sentinel
followed by its span.

One difference from T5: the number of spans is also at most the number of
kept tokens (T5's segmentation fails when a high `noise_density` leaves
fewer kept tokens than spans). Counts are computed in float64 with
round-half-to-even in Python and TensorFlow alike, so the lengths below are
exactly those of the preprocessor. Texts of fewer than 2 tokens are not
corrupted (T5 masks nothing in a 1-token text).
"""

import math

# Each encoder input and each decoder sequence gets a start ([CLS]) and an
# end ([SEP]) token, as in `SynthesizerSeq2SeqLMPreprocessor`; the decoder
# features drop the last token and the labels the first, so the decoder
# sequence length is the number of targets plus one.
ENCODER_EXTRA_TOKENS = 2
DECODER_EXTRA_TOKENS = 1


def check_span_corruption_arguments(noise_density, mean_noise_span_length):
    """Raises ValueError for a density outside (0, 1) or a span length < 1."""
    if (isinstance(noise_density, bool)
            or not isinstance(noise_density, (int, float))
            or not 0.0 < noise_density < 1.0):
        raise ValueError(
            "Argument `noise_density` must be a number strictly between 0 "
            f"and 1 (the fraction of tokens dropped). Received: "
            f"noise_density={noise_density!r}"
        )
    if (isinstance(mean_noise_span_length, bool)
            or not isinstance(mean_noise_span_length, (int, float))
            or not math.isfinite(mean_noise_span_length)
            or mean_noise_span_length < 1.0):
        raise ValueError(
            "Argument `mean_noise_span_length` must be a number >= 1 (tokens "
            "per dropped span). Received: "
            f"mean_noise_span_length={mean_noise_span_length!r}"
        )


def span_corruption_counts(text_length, noise_density=0.15,
                           mean_noise_span_length=3.0):
    """The number of dropped tokens and of dropped spans of a text.

    Args:
        text_length: int >= 0, the text's number of tokens.
        noise_density: float in (0, 1). Defaults to 0.15.
        mean_noise_span_length: float >= 1. Defaults to 3.0.

    Returns:
        `(num_noise_tokens, num_noise_spans)`.

    Example:

    >>> span_corruption_counts(100)
    (15, 5)
    >>> span_corruption_counts(1)
    (0, 0)
    """
    check_span_corruption_arguments(noise_density, mean_noise_span_length)
    if (isinstance(text_length, bool) or not isinstance(text_length, int)
            or text_length < 0):
        raise ValueError(
            "Argument `text_length` must be an int >= 0. Received: "
            f"text_length={text_length!r}"
        )
    if text_length < 2:
        return 0, 0
    num_noise = min(max(round(text_length * float(noise_density)), 1),
                    text_length - 1)
    num_spans = round(num_noise / float(mean_noise_span_length))
    num_spans = min(max(num_spans, 1), num_noise, text_length - num_noise)
    return int(num_noise), int(num_spans)


def span_corruption_lengths(text_length, noise_density=0.15,
                            mean_noise_span_length=3.0):
    """The sequence lengths that the span corruption of a text needs.

    The encoder input of a text of `n` tokens is its `n - num_noise_tokens`
    kept tokens and one sentinel per span, between `[CLS]` and `[SEP]`; the
    decoder sequence is `[CLS]`, each sentinel and its span, `[SEP]`, of
    which the decoder features and the labels take all but one token.

    Args:
        text_length: int >= 0, the text's number of tokens.
        noise_density: float in (0, 1). Defaults to 0.15.
        mean_noise_span_length: float >= 1. Defaults to 3.0.

    Returns:
        `(encoder_sequence_length, decoder_sequence_length)`, the smallest
        values of `SynthesizerSpanCorruptionPreprocessor`'s arguments that
        hold the text (and every shorter one).

    Example:

    >>> span_corruption_lengths(100)
    (92, 21)
    """
    num_noise, num_spans = span_corruption_counts(
        text_length, noise_density, mean_noise_span_length)
    return (text_length - num_noise + num_spans + ENCODER_EXTRA_TOKENS,
            num_noise + num_spans + DECODER_EXTRA_TOKENS)


def span_corruption_text_length(encoder_sequence_length,
                                decoder_sequence_length=None,
                                noise_density=0.15,
                                mean_noise_span_length=3.0):
    """The most tokens a text may have for its span corruption to fit.

    Both lengths grow with the text's length, so every text of at most this
    many tokens fits too: pack pretraining text into windows of exactly this
    many tokens (T5's `random_spans_helper` computes the same from the
    input length).

    Args:
        encoder_sequence_length: int, the preprocessor's encoder length.
        decoder_sequence_length: int, its decoder length, or `None` (no
            bound from the decoder: get the decoder length a window needs
            from `span_corruption_lengths`).
        noise_density: float in (0, 1). Defaults to 0.15.
        mean_noise_span_length: float >= 1. Defaults to 3.0.

    Returns:
        An int >= 0 (0: not even a 1-token text fits).

    Example:

    >>> span_corruption_text_length(92, 21)
    100
    >>> n = span_corruption_text_length(512)
    >>> n, span_corruption_lengths(n)
    (567, (512, 114))
    """
    check_span_corruption_arguments(noise_density, mean_noise_span_length)
    for name, value in (("encoder_sequence_length", encoder_sequence_length),
                        ("decoder_sequence_length", decoder_sequence_length)):
        if value is None and name == "decoder_sequence_length":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"Argument `{name}` must be an int >= 1. Received: "
                f"{name}={value!r}"
            )

    def fits(n):
        encoder, decoder = span_corruption_lengths(
            n, noise_density, mean_noise_span_length)
        return encoder <= encoder_sequence_length and (
            decoder_sequence_length is None
            or decoder <= decoder_sequence_length)

    if not fits(0):
        return 0
    n = 0
    while fits(n + 1):
        n += 1
    return n


def random_spans_noise_mask(lengths, seeds, noise_density=0.15,
                            mean_noise_span_length=3.0):
    """T5's random span noise mask, for a batch of lengths (TensorFlow).

    Graph-compatible (`tf.data`, `tf.function`); the mask of row `i` is a
    function of `lengths[i]` and `seeds[i]` alone (stateless random ops).

    Args:
        lengths: int tensor `(batch,)`, the texts' numbers of tokens.
        seeds: int32 tensor `(batch, 2)`, one stateless seed per row.
        noise_density: float in (0, 1). Defaults to 0.15.
        mean_noise_span_length: float >= 1. Defaults to 3.0.

    Returns:
        A bool tensor `(batch, max(lengths))`, true at dropped tokens
        (false past each row's length). Each row has
        `span_corruption_counts(length)` dropped tokens and spans.

    Example:

    >>> import tensorflow as tf
    >>> mask = random_spans_noise_mask(
    ...     tf.constant([20, 3]), tf.constant([[1, 2], [3, 4]]))
    >>> [int(m) for m in tf.reduce_sum(tf.cast(mask, "int32"), axis=1)]
    [3, 1]
    """
    import tensorflow as tf

    check_span_corruption_arguments(noise_density, mean_noise_span_length)
    n = tf.cast(lengths, tf.int32)
    seeds = tf.cast(seeds, tf.int32)
    max_length = tf.reduce_max(tf.concat([n, [0]], axis=0))
    # float64, round half to even: as Python's `round` in
    # `span_corruption_counts`.
    num_noise = tf.cast(
        tf.round(tf.cast(n, tf.float64) * float(noise_density)), tf.int32)
    num_noise = tf.minimum(tf.maximum(num_noise, 1), n - 1)
    num_noise = tf.where(n < 2, 0, num_noise)
    num_kept = n - num_noise
    num_spans = tf.cast(
        tf.round(tf.cast(num_noise, tf.float64)
                 / float(mean_noise_span_length)), tf.int32)
    num_spans = tf.minimum(tf.maximum(num_spans, 1),
                           tf.minimum(num_noise, num_kept))
    num_spans = tf.where(n < 2, 0, num_spans)

    def row_uniform(seed):
        # One draw of `max_length` per part (Philox is counter-based: the
        # first values do not depend on `max_length`, so a row's mask does
        # not depend on the batch).
        return tf.stack([
            tf.random.stateless_uniform([max_length], seed=seed),
            tf.random.stateless_uniform(
                [max_length],
                seed=tf.random.experimental.stateless_fold_in(seed, 1)),
        ])

    uniform = tf.map_fn(
        row_uniform, seeds,
        fn_output_signature=tf.TensorSpec([2, None], tf.float32))
    batch_size = tf.shape(n)[0]
    positions = tf.broadcast_to(
        tf.range(max_length)[tf.newaxis, :], [batch_size, max_length])

    def segment_ids(num_items, num_segments, uniform):
        """The segment of each item in a uniformly random composition of
        `num_items` into `num_segments` non-empty segments: `num_segments -
        1` of the `num_items - 1` gaps, drawn without replacement, start a
        new segment (T5 shuffles an indicator of the gaps)."""
        valid_gap = positions < (num_items - 1)[:, tf.newaxis]
        keys = tf.where(valid_gap, uniform, 2.0)
        rank = tf.argsort(tf.argsort(keys, axis=1, stable=True), axis=1,
                          stable=True)
        cut = valid_gap & (rank < (num_segments - 1)[:, tf.newaxis])
        starts = tf.concat(
            [tf.zeros([batch_size, 1], tf.int32), tf.cast(cut, tf.int32)],
            axis=1)[:, :max_length]
        return tf.cumsum(starts, axis=1)

    past_end = tf.int32.max
    noise_segment = segment_ids(num_noise, num_spans, uniform[:, 0])
    kept_segment = tf.where(positions < num_kept[:, tf.newaxis],
                            segment_ids(num_kept, num_spans, uniform[:, 1]),
                            past_end)
    # Kept span t comes before dropped span t: the i-th dropped token has i
    # dropped tokens and every kept token of spans <= its own before it.
    noise_position = positions + tf.searchsorted(
        kept_segment, noise_segment, side="right")
    noise_position = tf.where(positions < num_noise[:, tf.newaxis],
                              noise_position, past_end)
    return (tf.searchsorted(noise_position, positions, side="right")
            > tf.searchsorted(noise_position, positions, side="left"))
