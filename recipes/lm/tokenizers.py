"""The recipe's tokenizers (`--tokenizer=char|byte|wordpiece`) and the
encoding of whole splits to token ids."""

import time

import numpy as np
import tensorflow as tf

import keras
from keras_synth.models import SynthesizerCharTokenizer
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import learn_wordpiece_vocabulary
from recipes.core import files
from recipes.core import run_directory
from recipes.core.vocabulary import load_vocabulary
from recipes.lm.data import TOKENIZERS

CHAR_RESERVED = ("[PAD]", "[CLS]", "[SEP]", "[UNK]")


@keras.saving.register_keras_serializable(package="recipes_lm")
class ByteTokenizer(SynthesizerCharTokenizer):
    """UTF-8 bytes as tokens: id `4 + byte` after the reserved tokens
    `[PAD]`, `[CLS]`, `[SEP]`, `[UNK]` (no byte is unknown).

    Detokenization joins the bytes and decodes them as UTF-8, replacing an
    invalid sequence (e.g. a character cut by a length limit) with U+FFFD.

    Example:

    >>> tokenizer = ByteTokenizer()
    >>> [int(i) for i in tokenizer("é!")]
    [199, 173, 37]
    >>> tokenizer.detokenize([199, 173, 37])
    'é!'
    """

    def __init__(self, vocabulary=None, **kwargs):
        kwargs.pop("lowercase", None)
        super().__init__(vocabulary=byte_vocabulary(), lowercase=False,
                         **kwargs)
        self.byte_table = None

    def tokenize(self, inputs):
        if not tf.executing_eagerly() or isinstance(inputs, tf.Tensor):
            return self._bytes_tf(inputs)
        if isinstance(inputs, (str, bytes)):
            return np.array(self._bytes_python(inputs), self.compute_dtype)
        return [self._bytes_python(text) for text in np.asarray(inputs)]

    def _bytes_python(self, text):
        if isinstance(text, np.ndarray):
            text = text.item()
        if isinstance(text, str):
            text = text.encode("utf-8")
        return [len(CHAR_RESERVED) + b for b in text]

    def _bytes_tf(self, inputs):
        if self.byte_table is None:
            with tf.init_scope():
                self.byte_table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant([bytes([b]) for b in range(256)]),
                        tf.range(len(CHAR_RESERVED), 256 + len(CHAR_RESERVED),
                                 dtype=tf.int64)),
                    default_value=self.oov_token_id)
        inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = inputs[tf.newaxis]
        ids = tf.ragged.map_flat_values(self.byte_table.lookup,
                                        tf.strings.bytes_split(inputs))
        ids = tf.cast(ids, self.compute_dtype)
        return ids[0] if unbatched else ids

    def detokenize(self, inputs):
        table = [b""] * len(CHAR_RESERVED) + [bytes([b]) for b in range(256)]
        if not tf.executing_eagerly() or isinstance(
                inputs, (tf.Tensor, tf.RaggedTensor)):
            if not isinstance(inputs, tf.RaggedTensor):
                inputs = tf.convert_to_tensor(inputs)
            unbatched = inputs.shape.rank == 1
            if unbatched:
                inputs = inputs[tf.newaxis]
            pieces = tf.gather(tf.constant(table), tf.cast(inputs, tf.int32))
            text = tf.strings.unicode_transcode(
                tf.strings.reduce_join(pieces, axis=-1), "UTF-8", "UTF-8",
                errors="replace")
            return text[0] if unbatched else text
        inputs = np.asarray(keras.ops.convert_to_numpy(inputs)).tolist()
        if not inputs or not isinstance(inputs[0], list):
            return b"".join(table[int(i)] for i in inputs).decode(
                "utf-8", "replace")
        return [self.detokenize(ids) for ids in inputs]

    def get_config(self):
        config = super().get_config()
        config.pop("vocabulary", None)
        return config


def byte_vocabulary():
    return list(CHAR_RESERVED) + [chr(b) for b in range(256)]


def make_tokenizer(kind, train_text=None, vocabulary=None, vocab_size=8000,
                   lowercase=False):
    """The tokenizer `kind` with `vocabulary`, or one learned from
    `train_text` (a string) when `vocabulary` is None."""
    if kind == "char":
        if vocabulary is None:
            vocabulary = SynthesizerCharTokenizer.learn_vocabulary(
                [train_text], lowercase=lowercase)
        return SynthesizerCharTokenizer(vocabulary, lowercase=lowercase)
    if kind == "byte":
        return ByteTokenizer()
    if kind == "wordpiece":
        if vocabulary is None:
            vocabulary = learn_wordpiece_vocabulary(
                [line for line in train_text.split("\n") if line.strip()],
                vocab_size, lowercase=lowercase)
        return SynthesizerTokenizer(vocabulary=vocabulary,
                                    lowercase=lowercase)
    raise ValueError(f"Argument `--tokenizer` must be one of {TOKENIZERS}. "
                     f"Received: --tokenizer={kind!r}")


def vocabulary_of(tokenizer):
    return [str(t) for t in tokenizer.get_vocabulary()]


def prepare_tokenizer(run_dir, args, train_text, log=print):
    """The run's tokenizer; its vocabulary is saved in the run directory
    (`vocabulary.json`, a JSON list: characters may be newlines; a resumed run
    reads it back)."""
    saved = run_dir.path("vocabulary.json")
    vocabulary = None
    if args.tokenizer != "byte":
        if files.isfile(saved):
            vocabulary = run_directory.read_json(saved)
        elif args.vocab_file:
            vocabulary = load_vocabulary(args.vocab_file)
    start = time.time()
    tokenizer = make_tokenizer(args.tokenizer, train_text, vocabulary,
                               args.vocab_size, args.lowercase)
    if vocabulary is None and args.tokenizer != "byte":
        log(f"Learned a {args.tokenizer} vocabulary of "
            f"{tokenizer.vocabulary_size()} tokens in "
            f"{time.time() - start:.1f}s.")
    if run_dir.is_chief and not files.isfile(saved) and (
            args.tokenizer != "byte"):
        run_directory.write_json(saved, vocabulary_of(tokenizer))
    return tokenizer


def _ragged_ids(tokenizer, lines, batch=4096):
    out = []
    for start in range(0, len(lines), batch):
        ids = tokenizer(tf.constant(lines[start:start + batch]))
        # keras-hub tokenizers give lists eagerly, others ragged tensors.
        rows = ids.numpy() if hasattr(ids, "numpy") else ids
        out.extend(np.asarray(row, "int32") for row in rows)
    return out


def encode_documents(tokenizer, lines):
    """Token ids of each line (a list of int32 arrays)."""
    return _ragged_ids(tokenizer, list(lines))


def encode_stream(tokenizer, text):
    """The token stream of `text`: characters or bytes (newlines included)
    for char/byte, WordPiece ids of each line followed by `[SEP]`."""
    if isinstance(tokenizer, SynthesizerTokenizer):
        lines = [line for line in text.split("\n") if line.strip()]
        sep = tokenizer.token_to_id("[SEP]")
        ids = []
        for row in encode_documents(tokenizer, lines):
            ids.extend(row.tolist())
            ids.append(sep)
        return np.asarray(ids, "int32")
    # One tensor per chunk of lines keeps the strings small.
    lines = text.splitlines(keepends=True)
    chunks = ["".join(lines[i:i + 2000]) for i in range(0, len(lines), 2000)]
    return np.concatenate(_ragged_ids(tokenizer, chunks) or
                          [np.zeros(0, "int32")])


def count_unknown(tokenizer, ids):
    """How many ids are the unknown token (`[UNK]`)."""
    return int(np.sum(np.asarray(ids) == tokenizer.token_to_id("[UNK]")))


__all__ = ["ByteTokenizer", "count_unknown", "prepare_tokenizer",
           "encode_documents", "encode_stream", "make_tokenizer",
           "vocabulary_of"]
