"""Token sequences to the fixed-length rows the LRA models read: padded to
`--max_length`, longer ones cut and counted (never silently).

Text: `[CLS] bytes [SEP]` (`SynthesizerByteTokenizer`'s ids, as
`SynthesizerTextClassifierPreprocessor` packs one segment: a cut document
keeps its `[SEP]`). ListOps: `[CLS] tokens` (`listops.encode`). Padding is
id 0 (`[PAD]`) at the end. NumPy (the byte tokenizer imports Keras).
"""

import numpy as np

from keras_synth.models.tokenizers.byte_tokenizer import SynthesizerByteTokenizer

PAD_ID = 0


class Packed:
    """Rows of token ids and what packing them cut.

    Attributes:
        token_ids: int32 `(count, length)`, padded with 0.
        lengths: int32 `(count,)`, the tokens of each row before padding.
        cut: how many sequences were longer than `length` and were cut.
        longest: the longest sequence before cutting (tokens).
    """

    def __init__(self, token_ids, lengths, cut, longest):
        self.token_ids = token_ids
        self.lengths = lengths
        self.cut = cut
        self.longest = longest

    def summary(self):
        """What `results.json` records of a split's packing."""
        return {"examples": int(len(self.lengths)), "cut": int(self.cut),
                "longest_tokens": int(self.longest),
                "mean_tokens": float(np.mean(self.lengths))
                if len(self.lengths) else 0.0}


def pack(sequences, length, keep_last=False):
    """Pads (or cuts) each id sequence to `length`.

    Args:
        sequences: lists of token ids.
        length: the row length (`--max_length`).
        keep_last: whether a cut sequence keeps its last token (an end
            token such as `[SEP]`) in its last position.

    Returns:
        A `Packed`.
    """
    if length < 2:
        raise ValueError(f"Argument `length` must be at least 2. Received: "
                         f"length={length}")
    rows = np.full((len(sequences), length), PAD_ID, "int32")
    lengths = np.zeros(len(sequences), "int32")
    cut = longest = 0
    for row, ids in enumerate(sequences):
        longest = max(longest, len(ids))
        if len(ids) > length:
            cut += 1
            ids = (list(ids[:length - 1]) + [ids[-1]] if keep_last
                   else ids[:length])
        rows[row, :len(ids)] = ids
        lengths[row] = len(ids)
    return Packed(rows, lengths, cut, longest)


def byte_sequences(texts, tokenizer=None):
    """`[CLS] bytes [SEP]` ids of each text (UTF-8 bytes through
    `SynthesizerByteTokenizer`)."""
    tokenizer = tokenizer or SynthesizerByteTokenizer()
    start, end = tokenizer.start_token_id, tokenizer.end_token_id
    return [[start] + [int(i) for i in tokenizer.tokenize(text)] + [end]
            for text in texts]


def cut_line(what, split, packed, length):
    """The log line about the sequences of a split that were cut."""
    if not packed.cut:
        return (f"{what} {split}: {len(packed.lengths):,} examples, none "
                f"longer than --max_length={length} (longest "
                f"{packed.longest:,} tokens).")
    return (f"{what} {split}: {packed.cut:,} of {len(packed.lengths):,} "
            f"examples longer than --max_length={length} tokens were cut "
            f"to it (longest {packed.longest:,} tokens).")


__all__ = ["PAD_ID", "Packed", "byte_sequences", "cut_line", "pack"]
