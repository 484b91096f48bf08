"""Sentinel tokens: the vocabulary entries that stand for dropped spans in
span corruption (T5's `<extra_id_N>`)."""

# The name of sentinel `i`. Bracketed like the reserved tokens: WordPiece
# splits brackets off words, so no text ever tokenizes to a sentinel (span
# corruption puts their ids in place of the spans after tokenization).
SENTINEL_TOKEN_FORMAT = "[S{}]"


def sentinel_tokens(num_sentinels):
    """The names of the first `num_sentinels` sentinel tokens.

    `"[S0]"`, `"[S1]"`, ...: span corruption
    (`SynthesizerSpanCorruptionPreprocessor`) replaces the `i`-th dropped
    span of a text with sentinel `i` in the encoder input, and the targets
    list each sentinel followed by its span. A vocabulary holds them after
    the reserved tokens when learned with
    `learn_wordpiece_vocabulary(..., num_sentinels=N)`.

    Args:
        num_sentinels: int >= 0.

    Returns:
        A list of `num_sentinels` strings.

    Example:

    >>> sentinel_tokens(3)
    ['[S0]', '[S1]', '[S2]']
    """
    if (not isinstance(num_sentinels, int) or isinstance(num_sentinels, bool)
            or num_sentinels < 0):
        raise ValueError(
            "Argument `num_sentinels` must be an int >= 0. Received: "
            f"num_sentinels={num_sentinels!r}"
        )
    return [SENTINEL_TOKEN_FORMAT.format(i) for i in range(num_sentinels)]
