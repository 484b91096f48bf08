"""The recipe's tokenizers (`--tokenizer=char|byte|wordpiece`: the
package's `SynthesizerCharTokenizer`, `SynthesizerByteTokenizer` and
`SynthesizerTokenizer`) and the encoding of whole splits to token ids."""

import time

import numpy as np
import tensorflow as tf

from keras_synth.models import SynthesizerByteTokenizer
from keras_synth.models import SynthesizerCharTokenizer
from keras_synth.models import SynthesizerTokenizer
from keras_synth.models import learn_wordpiece_vocabulary
from recipes.core import storage
from recipes.core.vocabulary import load_vocabulary
from recipes.lm.data import TOKENIZERS


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
        return SynthesizerByteTokenizer()
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
        if tf.io.gfile.exists(saved):
            vocabulary = storage.read_json(saved)
        elif args.vocab_file:
            vocabulary = load_vocabulary(args.vocab_file)
    start = time.time()
    tokenizer = make_tokenizer(args.tokenizer, train_text, vocabulary,
                               args.vocab_size, args.lowercase)
    if vocabulary is None and args.tokenizer != "byte":
        log(f"Learned a {args.tokenizer} vocabulary of "
            f"{tokenizer.vocabulary_size()} tokens in "
            f"{time.time() - start:.1f}s.")
    if run_dir.is_chief and not tf.io.gfile.exists(saved) and (
            args.tokenizer != "byte"):
        storage.write_json(saved, vocabulary_of(tokenizer))
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


__all__ = ["count_unknown", "prepare_tokenizer",
           "encode_documents", "encode_stream", "make_tokenizer",
           "vocabulary_of"]
