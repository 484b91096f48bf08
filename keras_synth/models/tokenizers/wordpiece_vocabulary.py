"""`learn_wordpiece_vocabulary`: a WordPiece vocabulary for
`SynthesizerTokenizer`, learned with the `tokenizers` library."""

import unicodedata

from keras_synth.models.tokenizers.sentinel_tokens import sentinel_tokens
from keras_synth.models.tokenizers.synthesizer_tokenizer import RESERVED_TOKENS

# keras-hub's WordPieceTokenizer splits text into words as BERT does (its
# `split=True, split_on_cjk=True` defaults): ASCII whitespace, control and
# format characters separate words and are dropped; punctuation (all ASCII
# non-alphanumerics and Unicode's P* categories) and CJK ideographs are words
# of their own. The same patterns, in the Oniguruma syntax of `tokenizers`.
_DELIMITER_PATTERN = r"[ \t\n\r\f]|\p{Cc}|\p{Cf}"
_KEPT_PATTERN = "|".join([
    r"[!-/]", r"[:-@]", r"[\[-`]", r"[{-~]", r"\p{P}",
    r"[\x{4E00}-\x{9FFF}]", r"[\x{3400}-\x{4DBF}]",
    r"[\x{20000}-\x{2A6DF}]", r"[\x{2A700}-\x{2B73F}]",
    r"[\x{2B740}-\x{2B81F}]", r"[\x{2B820}-\x{2CEAF}]",
    r"[\x{F900}-\x{FAFF}]", r"[\x{2F800}-\x{2FA1F}]",
])
_CONTINUATION = "##"


def _strip_accents(text):
    """NFD, then without the combining marks (as keras-hub)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _casefold(word):
    """Unicode's NFKC_Casefold, as tensorflow-text's `case_fold_utf8`."""
    return unicodedata.normalize(
        "NFKC", unicodedata.normalize("NFKC", word).casefold())


def _word_splitter():
    from tokenizers import Regex
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_DELIMITER_PATTERN), behavior="removed"),
        pre_tokenizers.Split(Regex(_KEPT_PATTERN), behavior="isolated"),
    ])


def _words(texts, lowercase, strip_accents):
    """Each text's words as keras-hub's WordPieceTokenizer sees them, one a
    line, and the alphabet: the characters that start words, then those
    that continue them (as `##` pieces), each sorted.

    keras-hub strips accents, splits, then lowercases each word (lowercasing
    first would differ: NFKC turns "…" into "...", three words)."""
    splitter = _word_splitter()
    folded = {}
    first, rest = set(), set()
    lines = []
    for text in texts:
        text = str(text)
        if strip_accents:
            text = _strip_accents(text)
        words = [w for w, _ in splitter.pre_tokenize_str(text)]
        if lowercase:
            words = [folded.get(w) or folded.setdefault(w, _casefold(w))
                     for w in words]
        words = [w for w in words if w]
        for word in words:
            first.add(word[0])
            rest.update(word[1:])
        lines.append("\n".join(words))
    alphabet = sorted(first) + sorted(_CONTINUATION + c for c in rest)
    return lines, alphabet


def learn_wordpiece_vocabulary(texts, vocabulary_size, lowercase=True,
                               strip_accents=False, num_sentinels=0):
    """Learns a WordPiece vocabulary for `SynthesizerTokenizer` from text.

    Uses the WordPiece trainer of Hugging Face's `tokenizers` library (Rust:
    seconds for a corpus of 100,000 sentences; no TensorFlow needed), with
    the normalisation and word splitting of keras-hub's
    `WordPieceTokenizer`, so that its vocabulary covers what that tokenizer
    produces: every character of the text, at the start of a word and as a
    `##` continuation piece, then the most useful merges. The reserved
    tokens come first, `[PAD]` at id 0, then the `num_sentinels` sentinel
    tokens of span corruption (`"[S0]"`, `"[S1]"`, ...: see
    `sentinel_tokens`). The result does not depend on the
    run (ties are broken in a fixed order).

    Args:
        texts: an iterable of strings (the training text).
        vocabulary_size: int, the largest size of the vocabulary (fewer
            tokens when the text has fewer words and pieces). It must leave
            room for the reserved tokens and every character of the text.
        lowercase: bool, whether to lowercase first (match the tokenizer's
            `lowercase`). Defaults to `True`.
        strip_accents: bool, whether to strip accents first (match the
            tokenizer's `strip_accents`). Defaults to `False`.
        num_sentinels: int, how many sentinel tokens to reserve (ids 5 to
            `4 + num_sentinels`), for pretraining with
            `SynthesizerSpanCorruptionPreprocessor`. They count in
            `vocabulary_size`. Defaults to 0 (none: the vocabulary of
            earlier releases).

    Returns:
        The vocabulary, a list of strings.

    Example:

    >>> vocab = learn_wordpiece_vocabulary(
    ...     ["the plot is dull .", "the cast is grand ."] * 10, 100)
    >>> vocab[:5]
    ['[PAD]', '[CLS]', '[SEP]', '[UNK]', '[MASK]']
    >>> "plot" in vocab
    True
    >>> learn_wordpiece_vocabulary(
    ...     ["the plot is dull ."], 100, num_sentinels=2)[3:8]
    ['[UNK]', '[MASK]', '[S0]', '[S1]', '.']
    """
    sentinels = sentinel_tokens(num_sentinels)
    reserved = list(RESERVED_TOKENS) + sentinels
    if (not isinstance(vocabulary_size, int)
            or isinstance(vocabulary_size, bool)
            or vocabulary_size <= len(reserved)):
        raise ValueError(
            "Argument `vocabulary_size` must be an int larger than the "
            f"{len(reserved)} reserved tokens ({len(RESERVED_TOKENS)} and "
            f"num_sentinels={num_sentinels}). Received: "
            f"vocabulary_size={vocabulary_size!r}"
        )
    try:
        from tokenizers import Tokenizer
        from tokenizers import models
        from tokenizers import pre_tokenizers
        from tokenizers import trainers
    except ImportError:
        raise ImportError(
            "learn_wordpiece_vocabulary needs the `tokenizers` package: "
            'pip install "keras-synth[nlp]" (or pip install tokenizers).'
        ) from None
    lines, alphabet = _words(texts, lowercase, strip_accents)
    if not lines:
        raise ValueError("Argument `texts` is empty; expected training text.")
    if len(reserved) + len(alphabet) > vocabulary_size:
        raise ValueError(
            f"Argument `vocabulary_size={vocabulary_size}` is too small for "
            f"this text: the {len(reserved)} reserved tokens (sentinels "
            f"included) and the {len(alphabet)} characters of the text (word "
            "starts and `##` continuations) need "
            f"{len(reserved) + len(alphabet)}. Expected at least that."
        )
    tokenizer = Tokenizer(models.WordPiece(unk_token=RESERVED_TOKENS[3]))
    # The words are split and normalised already, one a line.
    tokenizer.pre_tokenizer = pre_tokenizers.Split("\n", behavior="removed")
    # The alphabet is given in sorted order (as special tokens, which keep
    # the order given): the trainer would otherwise number the `##` pieces
    # in hash-map order, and break ties between merges differently from run
    # to run.
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocabulary_size,
        special_tokens=reserved + alphabet,
        continuing_subword_prefix=_CONTINUATION,
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer=trainer)
    vocabulary = tokenizer.get_vocab()
    return sorted(vocabulary, key=vocabulary.get)
