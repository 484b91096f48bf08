"""Batch lengths on backends that compile one step per input shape (JAX).

TensorFlow and PyTorch take batches cut to their longest sequence (any
length). JAX's `fit` compiles its step again for every new batch shape, so
there a batch is padded up to the next of a few lengths instead: 16, 32, 64,
... (powers of two) and the full `--max_length`. That is at most
`log2(max_length / 16) + 2` compilations, each batch at most twice as long
as its longest sequence (or 16), where padding every batch to `--max_length`
makes short sentences pay for the longest one.
"""

SMALLEST_BUCKET = 16


def bucket_lengths(full_length, smallest=SMALLEST_BUCKET):
    """The lengths batches are padded up to: the powers of two from
    `smallest` below `full_length`, then `full_length`.

    >>> bucket_lengths(128)
    (16, 32, 64, 128)
    >>> bucket_lengths(100)
    (16, 32, 64, 100)
    >>> bucket_lengths(12)
    (12,)
    """
    if isinstance(full_length, bool) or not isinstance(full_length, int) \
            or full_length < 1:
        raise ValueError(
            "`full_length` must be a positive integer (the batches' full "
            f"length). Received: full_length={full_length!r}")
    lengths = []
    length = smallest
    while length < full_length:
        lengths.append(length)
        length *= 2
    return tuple(lengths) + (full_length,)


def bucketed_length(length, full_length):
    """A scalar int32 tensor: the smallest of `bucket_lengths(full_length)`
    that is at least `length` (a scalar tensor, at most `full_length`)."""
    import tensorflow as tf

    buckets = tf.constant(bucket_lengths(full_length), tf.int32)
    length = tf.cast(length, tf.int32)
    return tf.reduce_min(tf.boolean_mask(buckets, buckets >= length))
