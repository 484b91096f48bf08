"""`SynthesizerSpanCorruptionPreprocessor`: plain text to T5's span
corruption inputs and targets, for pretraining `SynthesizerSeq2SeqLM`."""

import keras
import numpy as np

from keras_synth._hub import preprocessing_function
from keras_synth.models.synthesizer_seq2seq import span_corruption
from keras_synth.models.synthesizer_seq2seq.synthesizer_seq2seq_lm_preprocessor import (  # noqa: E501
    SynthesizerSeq2SeqLMPreprocessor,
)
from keras_synth.models.tokenizers.sentinel_tokens import sentinel_tokens
from keras_synth.models.tokenizers.synthesizer_tokenizer import (
    SynthesizerTokenizer,
)

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - keras-hub needs TensorFlow
    tf = None

_MAX_LISTED = 10


def _vocabulary_or_none(tokenizer):
    """The tokenizer's vocabulary, or `None` before it is set (presets load
    it after building the tokenizer)."""
    try:
        vocabulary = tokenizer.get_vocabulary()
    except (AttributeError, TypeError, ValueError):
        return None
    return None if vocabulary is None else list(vocabulary)


def _seed_words(seed):
    """An int seed as two int32 words (low, high)."""
    words = np.array([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF],
                     np.uint32)
    return words.view(np.int32).tolist()


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerSpanCorruptionPreprocessor(SynthesizerSeq2SeqLMPreprocessor):
    """Span corruption of plain text (T5's pretraining) for
    `SynthesizerSeq2SeqLM`.

    Takes a batch of strings (no targets) and returns `(x, y,
    sample_weight)` as `SynthesizerSeq2SeqLMPreprocessor` does for
    translation pairs, so that `SynthesizerSeq2SeqLM(backbone,
    preprocessor=SynthesizerSpanCorruptionPreprocessor(...)).fit(texts)`
    pretrains on plain text. Each text is tokenized, then
    `round(n * noise_density)` of its `n` tokens are dropped in
    `round(num_noise / mean_noise_span_length)` random spans, as T5's
    `random_spans_noise_mask` (`span_corruption_counts` gives the exact
    counts; the text alternates kept and dropped spans, starting with a
    kept one and ending with a dropped one). In token-id space:

    - encoder input: `[CLS]`, the text with the `i`-th dropped span
      replaced by sentinel `i` (`"[S0]"`, `"[S1]"`, ...), `[SEP]`;
    - decoder sequence: `[CLS]`, sentinel 0, span 0, sentinel 1, span 1,
      ..., `[SEP]`; the decoder features are all but its last token, the
      labels all but its first.

    The sentinels are tokens of the vocabulary (learn one with
    `learn_wordpiece_vocabulary(..., num_sentinels=N)`); WordPiece splits
    brackets off words, so no text tokenizes to a sentinel.

    Nothing is cut: a text longer than `max_text_length` tokens (the most
    whose corruption fits both sequence lengths:
    `span_corruption_text_length`) raises an `InvalidArgumentError`, eagerly
    and inside `tf.data`. Pack pretraining text into windows of at most
    `max_text_length` tokens, and choose the lengths for a window with
    `span_corruption_lengths`.

    Determinism: with an int `seed`, the corruption of a text depends on
    the seed and the text only (a stateless seed per text: its fingerprint
    and `seed`), whatever the batch, the order, `tf.data`'s parallelism or
    the backend, and is the same in every epoch. With `seed=None`
    (default) each call draws fresh spans (not reproducible).

    Args:
        tokenizer: a `SynthesizerTokenizer` whose vocabulary holds the
            sentinel tokens.
        encoder_sequence_length: int, the packed encoder input's length.
            Defaults to 512 (T5's).
        decoder_sequence_length: int, or `None` (default): the length the
            longest text that fits the encoder needs
            (`span_corruption_lengths(span_corruption_text_length(
            encoder_sequence_length))[1]`: 114 for 512).
        noise_density: float in (0, 1), the fraction of tokens dropped.
            Defaults to 0.15.
        mean_noise_span_length: float >= 1, the mean length of a dropped
            span. Defaults to 3.0.
        sentinel_tokens: list of strings, the sentinel tokens in order, or
            `None` (default): `"[S0]"`, `"[S1]"`, ... (`sentinel_tokens`),
            as many as the longest text that fits has spans. There must be
            at least that many, all in the vocabulary.
        seed: int or `None` (default). See determinism above.
        encoder_tokenizer: must be `None` (the encoder input and the
            targets share the sentinels, so one tokenizer serves both).

    Call arguments:
        x: a string or a batch of strings (list, array or string tensor).
        y, sample_weight: must be `None` (the targets come from the text).

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `encoder_token_ids`,
        `encoder_padding_mask` `(batch, encoder_sequence_length)`,
        `decoder_token_ids`, `decoder_padding_mask` `(batch,
        decoder_sequence_length)`; `y` the labels, `sample_weight` their
        padding mask.

    Example:

    >>> import keras_synth
    >>> texts = ["the cat sat on the mat and the dog ran in the park"] * 4
    >>> vocab = keras_synth.models.learn_wordpiece_vocabulary(
    ...     texts, 100, num_sentinels=4)
    >>> tokenizer = keras_synth.models.SynthesizerTokenizer(vocab)
    >>> preprocessor = SynthesizerSpanCorruptionPreprocessor(
    ...     tokenizer, encoder_sequence_length=16, noise_density=0.3,
    ...     mean_noise_span_length=2.0, seed=3)
    >>> preprocessor.decoder_sequence_length, preprocessor.max_text_length
    (8, 17)
    >>> x, y, w = preprocessor(texts[:1])
    >>> tokenizer.detokenize(x["encoder_token_ids"][0])
    '[CLS] the [S0] sat on the mat and the dog ran [S1] [SEP] [PAD]...'
    >>> tokenizer.detokenize(y[0])
    '[S0] cat [S1] in the park [SEP] [PAD]'
    """

    draws_random = True  # its outputs are random (`TracedPreprocessingMixin`)

    tokenizer_cls = SynthesizerTokenizer

    def __init__(
        self,
        tokenizer,
        encoder_sequence_length=512,
        decoder_sequence_length=None,
        noise_density=0.15,
        mean_noise_span_length=3.0,
        sentinel_tokens=None,
        seed=None,
        encoder_tokenizer=None,
        **kwargs,
    ):
        span_corruption.check_span_corruption_arguments(
            noise_density, mean_noise_span_length)
        if encoder_tokenizer is not None:
            raise ValueError(
                "Argument `encoder_tokenizer` must be `None` for "
                "SynthesizerSpanCorruptionPreprocessor: the encoder input and "
                "the targets share the sentinel tokens, so `tokenizer` serves "
                f"both. Received: encoder_tokenizer={encoder_tokenizer!r}"
            )
        if decoder_sequence_length is None:
            decoder_sequence_length = span_corruption.span_corruption_lengths(
                span_corruption.span_corruption_text_length(
                    encoder_sequence_length, None, noise_density,
                    mean_noise_span_length),
                noise_density, mean_noise_span_length)[1]
        if seed is not None and (isinstance(seed, bool)
                                 or not isinstance(seed, int) or seed < 0):
            raise ValueError(
                "Argument `seed` must be an int >= 0 or None. Received: "
                f"seed={seed!r}"
            )
        if sentinel_tokens is not None:
            if isinstance(sentinel_tokens, str) or not all(
                    isinstance(t, str) for t in sentinel_tokens):
                raise ValueError(
                    "Argument `sentinel_tokens` must be a list of strings or "
                    f"None. Received: sentinel_tokens={sentinel_tokens!r}"
                )
            sentinel_tokens = list(sentinel_tokens)
        super().__init__(
            tokenizer,
            encoder_sequence_length=encoder_sequence_length,
            decoder_sequence_length=decoder_sequence_length,
            **kwargs,
        )
        self.noise_density = float(noise_density)
        self.mean_noise_span_length = float(mean_noise_span_length)
        self.sentinel_tokens = sentinel_tokens
        self.seed = seed
        if self.max_text_length < 2:
            raise ValueError(
                "Arguments `encoder_sequence_length="
                f"{encoder_sequence_length}` and `decoder_sequence_length="
                f"{decoder_sequence_length}` are too short for span "
                f"corruption: they hold texts of {self.max_text_length} "
                "tokens, which lose none. Expected lengths of at least "
                f"{span_corruption.span_corruption_lengths(2)}."
            )
        if _vocabulary_or_none(tokenizer) is not None:
            self.sentinel_ids()  # Checks the vocabulary now.

    @property
    def max_text_length(self):
        """The most tokens a text may have (`span_corruption_text_length`
        of the sequence lengths)."""
        return span_corruption.span_corruption_text_length(
            self.encoder_sequence_length, self.decoder_sequence_length,
            self.noise_density, self.mean_noise_span_length)

    @property
    def num_sentinels(self):
        """The number of sentinels used: the spans of the longest text."""
        return span_corruption.span_corruption_counts(
            self.max_text_length, self.noise_density,
            self.mean_noise_span_length)[1]

    def sentinel_ids(self):
        """The ids of the sentinel tokens used, in order (a list of ints).

        Raises:
            ValueError: too few sentinel tokens, or some are not in the
                vocabulary (the message names them).
        """
        needed = self.num_sentinels
        where = (
            f"texts of up to {self.max_text_length} tokens (the most that "
            f"fit encoder_sequence_length={self.encoder_sequence_length} and "
            f"decoder_sequence_length={self.decoder_sequence_length}) have "
            f"up to {needed} spans"
        )
        if self.sentinel_tokens is None:
            tokens = sentinel_tokens(needed)
        else:
            tokens = self.sentinel_tokens[:needed]
            if len(tokens) < needed:
                raise ValueError(
                    f"Argument `sentinel_tokens` lists {len(tokens)} tokens; "
                    f"{where}. Expected at least {needed} sentinel tokens."
                )
        vocabulary = _vocabulary_or_none(self.tokenizer)
        if vocabulary is None:
            raise ValueError(
                "The tokenizer of SynthesizerSpanCorruptionPreprocessor has "
                "no vocabulary set."
            )
        known = set(vocabulary)
        missing = [t for t in tokens if t not in known]
        if missing:
            listed = missing[:_MAX_LISTED]
            more = (f" and {len(missing) - len(listed)} more"
                    if len(missing) > len(listed) else "")
            raise ValueError(
                "Argument `tokenizer`: its vocabulary lacks the sentinel "
                f"token(s) {listed}{more}; {where}, each replaced by one of "
                f"{needed} sentinels. Learn the vocabulary with "
                f"`learn_wordpiece_vocabulary(..., num_sentinels={needed})` "
                "(or more), or shorten the sequence lengths."
            )
        return [int(self.tokenizer.token_to_id(t)) for t in tokens]

    def _row_seeds(self, text):
        """One stateless seed `(batch, 2)` per text."""
        if self.seed is None:
            return tf.random.uniform(
                [tf.shape(text)[0], 2], minval=tf.int32.min,
                maxval=tf.int32.max, dtype=tf.int32)
        fingerprint = tf.bitcast(
            tf.reshape(tf.fingerprint(text), [-1, 2, 4]), tf.int32)
        return tf.bitwise.bitwise_xor(
            fingerprint, tf.constant(_seed_words(self.seed), tf.int32))

    def corrupt(self, token_ids, seeds):
        """Span corruption of a batch of token ids (TensorFlow).

        Args:
            token_ids: a `tf.RaggedTensor` `(batch, None)` of token ids.
            seeds: int32 `(batch, 2)`, a stateless seed per row.

        Returns:
            `(inputs, targets)`, ragged: the text with each dropped span
            replaced by its sentinel, and each sentinel followed by its
            span (no start or end tokens).
        """
        lengths = tf.cast(token_ids.row_lengths(), tf.int32)
        limit = self.max_text_length
        message = (
            f"SynthesizerSpanCorruptionPreprocessor: a text is longer than "
            f"{limit} tokens, the most whose span corruption fits "
            f"encoder_sequence_length={self.encoder_sequence_length} and "
            f"decoder_sequence_length={self.decoder_sequence_length} "
            f"(noise_density={self.noise_density}, "
            f"mean_noise_span_length={self.mean_noise_span_length}). "
            "Nothing is cut: split texts into windows of at most "
            f"{limit} tokens (span_corruption_text_length), or raise the "
            "lengths (span_corruption_lengths(n) gives what n tokens need)."
        )
        if tf.executing_eagerly():
            too_long = [(i, int(n)) for i, n in enumerate(lengths.numpy())
                        if n > limit]
            if too_long:
                raise ValueError(
                    f"{message} Received texts (index, tokens): "
                    f"{too_long[:_MAX_LISTED]}"
                )
        else:
            check = tf.debugging.assert_less_equal(
                lengths, tf.constant(limit, tf.int32),
                message=message + " Text lengths:")
            with tf.control_dependencies([check]):
                lengths = tf.identity(lengths)
        ids = token_ids.to_tensor(default_value=0)
        noise = span_corruption.random_spans_noise_mask(
            lengths, seeds, self.noise_density, self.mean_noise_span_length)
        max_length = tf.shape(noise)[1]
        ids = ids[:, :max_length]
        valid = tf.sequence_mask(lengths, max_length)
        sentinels = tf.constant(self.sentinel_ids(), ids.dtype)
        num_spans = tf.reduce_sum(
            tf.cast(noise & ~self._shift(noise), tf.int32), axis=1)

        def replace_spans(spans):
            """Each span's first token becomes its sentinel, the rest go."""
            follows = self._shift(spans)
            first = spans & ~follows
            index = tf.cumsum(tf.cast(first, tf.int32), axis=1) - 1
            # Sentinels only for dropped spans: a text of one token has a
            # kept span and no dropped one.
            first_kept = first & (index < num_spans[:, tf.newaxis])
            index = tf.clip_by_value(index, 0, tf.shape(sentinels)[0] - 1)
            outputs = tf.where(first, tf.gather(sentinels, index), ids)
            keep = valid & ~(spans & follows) & (~first | first_kept)
            return tf.ragged.boolean_mask(outputs, keep)

        return replace_spans(noise), replace_spans(valid & ~noise)

    @staticmethod
    def _shift(mask):
        """`mask` one step to the right (false first)."""
        return tf.concat(
            [tf.zeros_like(mask[:, :1]), mask[:, :-1]], axis=1)

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None, **kwargs):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "SynthesizerSpanCorruptionPreprocessor takes raw text only "
                "(the targets are made from it). Received: "
                f"y={y!r}, sample_weight={sample_weight!r}"
            )
        if isinstance(x, dict):
            raise ValueError(
                "SynthesizerSpanCorruptionPreprocessor takes raw strings, "
                f"not a dict (received keys {sorted(x)}); for "
                "`encoder_text`/`decoder_text` pairs use "
                "SynthesizerSeq2SeqLMPreprocessor."
            )
        if kwargs:
            raise ValueError(
                "SynthesizerSpanCorruptionPreprocessor takes no call "
                f"arguments besides `x`. Received: {sorted(kwargs)}"
            )
        if not self.built:
            self.build(None)
        text = tf.convert_to_tensor(x)
        unbatched = text.shape.rank == 0
        if unbatched:
            text = text[tf.newaxis]
        token_ids = self.tokenizer(text)
        if isinstance(token_ids, (list, tuple)):  # eager keras-hub tokenizers
            token_ids = tf.ragged.constant(
                [list(row) for row in token_ids], dtype=tf.int32,
                ragged_rank=1, inner_shape=())
        elif not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.RaggedTensor.from_tensor(
                tf.convert_to_tensor(token_ids))
        inputs, targets = self.corrupt(token_ids, self._row_seeds(text))
        encoder_token_ids, encoder_padding_mask = self.encoder_packer(
            inputs, sequence_length=self.encoder_sequence_length)
        decoder_token_ids, decoder_padding_mask = self.decoder_packer(
            targets, sequence_length=self.decoder_sequence_length + 1)
        x = {
            "encoder_token_ids": encoder_token_ids,
            "encoder_padding_mask": encoder_padding_mask,
            "decoder_token_ids": decoder_token_ids[..., :-1],
            "decoder_padding_mask": decoder_padding_mask[..., :-1],
        }
        y = decoder_token_ids[..., 1:]
        sample_weight = decoder_padding_mask[..., 1:]
        if unbatched:
            x = {key: value[0] for key, value in x.items()}
            y, sample_weight = y[0], sample_weight[0]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "noise_density": self.noise_density,
                "mean_noise_span_length": self.mean_noise_span_length,
                "sentinel_tokens": self.sentinel_tokens,
                "seed": self.seed,
            }
        )
        return config

