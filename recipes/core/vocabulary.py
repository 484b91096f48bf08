"""WordPiece vocabularies: learned from the training text or read from a
file, checked, saved in the run directory."""

import time

from recipes.core import storage
from recipes.core.data_files import DataError
from recipes.core.data_files import check_data_file

RESERVED_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
PAD, CLS, SEP, UNK, MASK = RESERVED_TOKENS


def learn_wordpiece_vocabulary(texts, vocab_size, lowercase=True,
                               **options):
    """Learns a WordPiece vocabulary from an iterable of strings
    (`keras_synth.models.learn_wordpiece_vocabulary`: the `tokenizers`
    library's WordPiece trainer with keras-hub's normalisation and word
    splitting, `RESERVED_TOKENS` first, `[PAD]` at id 0).

    `options`: more arguments of the package's function (e.g. reserved
    sentinel tokens).

    Returns:
        The list of tokens.
    """
    from keras_synth.models import learn_wordpiece_vocabulary as learn

    return learn(texts, vocab_size, lowercase, **options)


def load_vocabulary(path, reserved_tokens=RESERVED_TOKENS):
    """Reads a vocabulary file (one token a line) and checks its tokens.

    Raises:
        DataError: the file is missing or empty, or lacks a reserved token.
    """
    check_data_file(path, "vocabulary file (one token a line)")
    vocab = [line for line in storage.read_text(path).split("\n")
             if line]
    missing = [t for t in reserved_tokens if t not in vocab]
    if missing:
        raise DataError(
            f"The vocabulary file {path} lacks the reserved token(s) "
            f"{missing}; expected all of {list(reserved_tokens)}."
        )
    if vocab[0] != reserved_tokens[0]:
        raise DataError(
            f"The vocabulary file {path} must start with {reserved_tokens[0]}"
            f" (padding id 0); it starts with {vocab[0]!r}."
        )
    return vocab


def save_vocabulary(vocab, path):
    storage.write_file(path, "".join(t + "\n" for t in vocab))


def wordpiece_tokenizer(vocab, lowercase=True):
    """A `keras_hub.tokenizers.WordPieceTokenizer` over `vocab` (ragged ids)."""
    import keras_hub

    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocab), lowercase=lowercase, oov_token=UNK,
        dtype="int32",
    )


def prepare_vocabulary(run_dir, texts, vocab_file=None, vocab_size=8000,
                       lowercase=True, log=print, filename="vocab.txt",
                       learn_options=None, reserved_tokens=RESERVED_TOKENS):
    """Returns the run's vocabulary, saved as `<run_dir>/<filename>`.

    A resumed run reuses its saved vocabulary; otherwise `vocab_file` is
    copied, or a vocabulary is learned from `texts` (a callable returning
    the training strings, so that they are only read when needed). A run
    with several vocabularies (e.g. one per language) gives each its own
    `filename`. `learn_options` are more arguments of
    `learn_wordpiece_vocabulary`; a `vocab_file` must hold every token of
    `reserved_tokens`.
    """
    saved = run_dir.path(filename)
    if storage.gfile().exists(saved):
        return load_vocabulary(saved, reserved_tokens)
    if vocab_file:
        vocab = load_vocabulary(vocab_file, reserved_tokens)
    else:
        start = time.time()
        vocab = learn_wordpiece_vocabulary(texts(), vocab_size, lowercase,
                                           **(learn_options or {}))
        log(f"Learned a WordPiece vocabulary of {len(vocab)} tokens in "
            f"{time.time() - start:.1f}s.")
    if run_dir.is_chief:
        save_vocabulary(vocab, saved)
    return vocab
