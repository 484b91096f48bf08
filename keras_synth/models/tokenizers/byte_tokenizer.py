"""`SynthesizerByteTokenizer`: UTF-8 bytes as tokens, after the reserved
tokens of `SynthesizerCharTokenizer`."""

import keras
import numpy as np

from keras_synth.models.tokenizers import dispatch
from keras_synth.models.tokenizers.synthesizer_char_tokenizer import (
    RESERVED_TOKENS,
)
from keras_synth.models.tokenizers.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - tf is needed only in tf.data
    tf = None

NUM_BYTES = 256
# The id of byte `b` is `BYTE_OFFSET + b`.
BYTE_OFFSET = len(RESERVED_TOKENS)


def byte_vocabulary():
    """The reserved tokens, then one token per byte value (`chr(b)`)."""
    return list(RESERVED_TOKENS) + [chr(b) for b in range(NUM_BYTES)]


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerByteTokenizer(SynthesizerCharTokenizer):
    """Byte-level tokenizer: each UTF-8 byte of the text is one token.

    The ids are those of a fixed vocabulary of 260 tokens: the reserved
    tokens `"[PAD]"` (0), `"[CLS]"` (1, start), `"[SEP]"` (2, end) and
    `"[UNK]"` (3), then byte `b` as id `4 + b` (no text is unknown).
    Detokenization joins the bytes and decodes them as UTF-8, replacing an
    invalid sequence (e.g. a character cut by a length limit) with U+FFFD;
    the reserved ids (padding, start and end tokens) detokenize to nothing.
    Tokenization runs in Python eagerly and in TensorFlow inside `tf.data`
    and `tf.function` (SavedModel export), with the same ids. Presets and
    `.keras` files written by release 0.1.0's language-model recipe
    (`recipes_lm>ByteTokenizer`) load as this class.

    Args:
        vocabulary: `None` (the default): the byte vocabulary. Accepted so
            that a saved vocabulary (a list, or the asset file of a preset)
            can be given back; it must be the byte vocabulary.
        lowercase: must be `False` (bytes are not lowercased; accepted for
            configs that carry it).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a string, a list of strings or a string tensor.

    Returns:
        The token ids: an int array (one string) or a list of int lists
        eagerly, a `tf.RaggedTensor` in TensorFlow graphs.

    Example:

    >>> tokenizer = SynthesizerByteTokenizer()
    >>> [int(i) for i in tokenizer("é!")]
    [199, 173, 37]
    >>> tokenizer.detokenize([199, 173, 37])
    'é!'
    >>> tokenizer.vocabulary_size()
    260
    """

    def __init__(self, vocabulary=None, lowercase=False, dtype="int32",
                 **kwargs):
        if lowercase is not False:
            raise ValueError(
                "Argument `lowercase` must be False for "
                "SynthesizerByteTokenizer (bytes are not lowercased). "
                f"Received: lowercase={lowercase!r}"
            )
        super().__init__(vocabulary=vocabulary, lowercase=False, dtype=dtype,
                         **kwargs)

    def set_vocabulary(self, vocabulary):
        """Checks that `vocabulary` (a list, a file path or `None`) is the
        byte vocabulary: the vocabulary of this tokenizer is fixed."""
        super().set_vocabulary(
            byte_vocabulary() if vocabulary is None else vocabulary)
        given = self.get_vocabulary()
        if given != byte_vocabulary():
            super().set_vocabulary(byte_vocabulary())
            first = next(i for i, (a, b) in enumerate(
                zip(given + [None], byte_vocabulary() + [None])) if a != b)
            raise ValueError(
                "Argument `vocabulary` must be the byte vocabulary (the "
                f"{len(RESERVED_TOKENS)} reserved tokens, then chr(0) .. "
                f"chr(255)), or None. Received {len(given)} tokens, "
                f"differing at index {first}: "
                f"{given[first] if first < len(given) else None!r}"
            )

    # ------------------------------------------------------------ tokenize

    def tokenize(self, inputs):
        return dispatch.tokenize(inputs, self._tokenize_bytes_tf,
                                 self._byte_ids, self.compute_dtype)

    def _byte_ids(self, text):
        if isinstance(text, np.ndarray):
            text = text.item()
        if isinstance(text, str):
            text = text.encode("utf-8")
        return [BYTE_OFFSET + b for b in bytes(text)]

    def _tokenize_bytes_tf(self, inputs):
        inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = inputs[tf.newaxis]
        pieces = tf.strings.bytes_split(inputs)
        ids = tf.ragged.map_flat_values(
            lambda b: tf.reshape(tf.io.decode_raw(b, tf.uint8), [-1]), pieces)
        ids = tf.cast(ids, self.compute_dtype) + BYTE_OFFSET
        return ids[0] if unbatched else ids

    def _detokenize_bytes_tf(self, inputs):
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 1
        if unbatched:
            inputs = inputs[tf.newaxis]
        table = tf.constant([b""] * BYTE_OFFSET
                            + [bytes([b]) for b in range(NUM_BYTES)])
        pieces = tf.gather(table, tf.cast(inputs, tf.int32))
        text = tf.strings.unicode_transcode(
            tf.strings.reduce_join(pieces, axis=-1), "UTF-8", "UTF-8",
            errors="replace")
        return text[0] if unbatched else text

    def _bytes_of(self, ids):
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < BYTE_OFFSET + NUM_BYTES]
        if bad:
            raise ValueError(
                "Argument `inputs` must hold ids in [0, "
                f"{BYTE_OFFSET + NUM_BYTES - 1}]. Received: {bad[:5]}"
            )
        return bytes(i - BYTE_OFFSET for i in ids if i >= BYTE_OFFSET)

    def detokenize(self, inputs):
        return dispatch.detokenize(
            inputs, self._detokenize_bytes_tf,
            lambda ids: self._bytes_of(ids).decode("utf-8", "replace"))

    def get_config(self):
        config = super().get_config()
        # Fixed: the byte vocabulary, no lowercasing.
        config.pop("vocabulary", None)
        config.pop("lowercase", None)
        return config
