"""`SynthesizerCharTokenizer`: a character vocabulary learned from text."""

import collections
import json
import os

import keras
import numpy as np
from keras.src.saving import serialization_lib

from keras_synth._hub import keras_hub
from keras_synth.models.preset_utils import check_local_preset
from keras_synth.models.preset_utils import load_local_tokenizer
from keras_synth.models.tokenizers import dispatch

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - tf is needed only in tf.data
    tf = None

VOCABULARY_FILENAME = "vocabulary.json"
RESERVED_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]")


def _as_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return _as_text(value.item())
    return str(value)


def _read_vocabulary(path):
    """A JSON list of tokens, or one token a line (newline not a token)."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if path.endswith(".json"):
        return json.loads(text)
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerCharTokenizer(keras_hub.tokenizers.Tokenizer):
    """Character-level tokenizer over a vocabulary learned from text.

    Each Unicode character is one token; characters that are not in the
    vocabulary map to one id, that of `"[UNK]"`. The vocabulary starts with
    the reserved tokens `"[PAD]"` (id 0, padding), `"[CLS]"` (start of a
    sequence), `"[SEP]"` (end of a sequence) and `"[UNK]"`; build one with
    `SynthesizerCharTokenizer.learn_vocabulary(texts)`. Tokenization runs in
    Python eagerly and in TensorFlow inside `tf.data` and `tf.function`
    (SavedModel export), with the same ids.

    Args:
        vocabulary: list of tokens (each reserved token, then single
            characters), or the path of a JSON list of them (or of a text
            file with one token a line).
        lowercase: bool, whether the text is lowercased before lookup.
            Defaults to `False`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a string, a list of strings or a string tensor.

    Returns:
        The token ids: a list (ragged) of int lists eagerly, a
        `tf.RaggedTensor` in TensorFlow graphs.

    Example:

    >>> vocabulary = SynthesizerCharTokenizer.learn_vocabulary(["abba cab"])
    >>> vocabulary
    ['[PAD]', '[CLS]', '[SEP]', '[UNK]', 'a', 'b', ' ', 'c']
    >>> tokenizer = SynthesizerCharTokenizer(vocabulary)
    >>> [int(i) for i in tokenizer("cab!")]
    [7, 4, 5, 3]
    >>> tokenizer.detokenize([7, 4, 5])
    'cab'
    """

    def __init__(self, vocabulary=None, lowercase=False, dtype="int32", **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        self.lowercase = lowercase
        self._vocabulary = None
        self._table = None
        for token, name in zip(
            RESERVED_TOKENS, ("pad_token", "start_token", "end_token", "oov_token")
        ):
            self._add_special_token(token, name)
        self.set_vocabulary(vocabulary)
        self.file_assets = [VOCABULARY_FILENAME]

    # ------------------------------------------------------------ vocabulary

    @staticmethod
    def learn_vocabulary(texts, max_vocabulary_size=None, lowercase=False):
        """Returns the reserved tokens and the characters of `texts`.

        Characters come by decreasing frequency (ties in order of first
        appearance); with `max_vocabulary_size`, the rarest are left out
        (they tokenize to `"[UNK]"`).

        Args:
            texts: an iterable of strings.
            max_vocabulary_size: optional int, the most tokens (reserved
                ones included).
            lowercase: bool, lowercase the text first (pass the same value to
                the tokenizer).
        """
        if max_vocabulary_size is not None and (
            int(max_vocabulary_size) != max_vocabulary_size
            or max_vocabulary_size <= len(RESERVED_TOKENS)
        ):
            raise ValueError(
                "Argument `max_vocabulary_size` must be an int larger than "
                f"the {len(RESERVED_TOKENS)} reserved tokens. Received: "
                f"max_vocabulary_size={max_vocabulary_size}"
            )
        counts = collections.Counter()
        for text in texts:
            text = _as_text(text)
            counts.update(text.lower() if lowercase else text)
        characters = [c for c, _ in counts.most_common()]
        vocabulary = list(RESERVED_TOKENS) + characters
        if max_vocabulary_size is not None:
            vocabulary = vocabulary[: int(max_vocabulary_size)]
        return vocabulary

    @classmethod
    def from_preset(cls, preset, config_file="tokenizer.json", **kwargs):
        """The tokenizer of a preset, of any model family that saved a
        `SynthesizerCharTokenizer` (or, from this class, a
        `SynthesizerByteTokenizer`)."""
        check_local_preset(preset)
        tokenizer = load_local_tokenizer(preset, config_file, cls, **kwargs)
        if tokenizer is not None:
            return tokenizer
        return super().from_preset(preset, config_file=config_file, **kwargs)

    def set_vocabulary(self, vocabulary):
        """Sets the vocabulary from a list of tokens or a file path."""
        if vocabulary is None:
            self._vocabulary = None
            self._table = None
            return
        if isinstance(vocabulary, str):
            if serialization_lib.in_safe_mode():
                raise ValueError(
                    "Requested the loading of a vocabulary file outside of "
                    "the model archive (safe mode). If you trust it, pass "
                    f"`safe_mode=False`. Vocabulary file: {vocabulary!r}"
                )
            vocabulary = _read_vocabulary(vocabulary)
        vocabulary = [_as_text(token) for token in vocabulary]
        missing = [t for t in RESERVED_TOKENS if t not in vocabulary]
        if missing:
            raise ValueError(
                f"Argument `vocabulary` lacks the reserved token(s) {missing}. "
                f"Expected all of {list(RESERVED_TOKENS)}, '[PAD]' first "
                "(build one with `SynthesizerCharTokenizer.learn_vocabulary`)."
                f" Received the first tokens: {vocabulary[:8]}"
            )
        if vocabulary[0] != RESERVED_TOKENS[0]:
            raise ValueError(
                "Argument `vocabulary` must start with '[PAD]' (padding id "
                f"0). Received: vocabulary[0]={vocabulary[0]!r}"
            )
        bad = [t for t in vocabulary if t not in RESERVED_TOKENS and len(t) != 1]
        if bad:
            raise ValueError(
                "Argument `vocabulary` must hold single characters besides the "
                f"reserved tokens. Received: {bad[:5]}"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("Argument `vocabulary` has duplicate tokens.")
        self._vocabulary = vocabulary
        self._token_to_id = {t: i for i, t in enumerate(vocabulary)}
        self._update_special_token_ids()
        self._table = self._build_table() if tf is not None else None

    def _check_vocabulary(self):
        if self._vocabulary is None:
            raise ValueError(
                "No vocabulary has been set for SynthesizerCharTokenizer: "
                "pass `vocabulary` (see `learn_vocabulary`)."
            )

    def get_vocabulary(self):
        self._check_vocabulary()
        return list(self._vocabulary)

    def vocabulary_size(self):
        self._check_vocabulary()
        return len(self._vocabulary)

    def id_to_token(self, id):
        self._check_vocabulary()
        if not 0 <= id < len(self._vocabulary):
            raise ValueError(
                f"`id` must be in range [0, {len(self._vocabulary) - 1}]. "
                f"Received: {id}"
            )
        return self._vocabulary[id]

    def token_to_id(self, token):
        self._check_vocabulary()
        if token not in self._token_to_id:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    def save_assets(self, dir_path):
        # JSON, not one token a line: "\n" is a character of the vocabulary.
        with open(
            os.path.join(dir_path, VOCABULARY_FILENAME), "w", encoding="utf-8"
        ) as file:
            json.dump(self._vocabulary, file, ensure_ascii=False)

    def load_assets(self, dir_path):
        self.set_vocabulary(os.path.join(dir_path, VOCABULARY_FILENAME))

    # ------------------------------------------------------------ tokenize

    def _lookup_table(self):
        if self._table is None:
            self._table = self._build_table()
        return self._table

    def _build_table(self):
        # Built eagerly (outside any tf.data or tf.function graph), so that
        # one table serves every pipeline. Reserved tokens are never
        # produced from text.
        with tf.init_scope():
            keys = [t for t in self._vocabulary if t not in RESERVED_TOKENS]
            values = [self._token_to_id[t] for t in keys]
            return tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(keys, tf.string),
                    tf.constant(values, tf.int64),
                ),
                default_value=self.oov_token_id,
            )

    def _tokenize_tf(self, inputs):
        inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = inputs[tf.newaxis]
        if self.lowercase:
            inputs = tf.strings.lower(inputs, encoding="utf-8")
        characters = tf.strings.unicode_split(inputs, "UTF-8")
        ids = tf.ragged.map_flat_values(self._lookup_table().lookup, characters)
        ids = tf.cast(ids, self.compute_dtype)
        return ids[0] if unbatched else ids

    def _tokenize_python(self, text):
        text = _as_text(text)
        if self.lowercase:
            text = text.lower()
        oov = self.oov_token_id
        lookup = self._token_to_id
        return [
            oov if c in RESERVED_TOKENS else lookup.get(c, oov) for c in text
        ]

    def tokenize(self, inputs):
        self._check_vocabulary()
        return dispatch.tokenize(inputs, self._tokenize_tf,
                                 self._tokenize_python, self.compute_dtype)

    def _detokenize_tf(self, inputs):
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 1
        if unbatched:
            inputs = inputs[tf.newaxis]
        vocabulary = tf.constant(self._vocabulary, tf.string)
        tokens = tf.gather(vocabulary, tf.cast(inputs, tf.int32))
        outputs = tf.strings.reduce_join(tokens, axis=-1)
        return outputs[0] if unbatched else outputs

    def detokenize(self, inputs):
        self._check_vocabulary()
        return dispatch.detokenize(
            inputs, self._detokenize_tf,
            lambda ids: "".join(self.id_to_token(int(i)) for i in ids))

    def call(self, inputs, *args, training=None, **kwargs):
        return self.tokenize(inputs, *args, **kwargs)

    def compute_output_spec(self, input_spec):
        return keras.KerasTensor(
            tuple(input_spec.shape) + (None,), dtype=self.compute_dtype
        )

    def get_config(self):
        config = super().get_config()
        # The vocabulary travels as an asset in presets, in the config in
        # `.keras` files.
        config.update(
            {"vocabulary": self._vocabulary, "lowercase": self.lowercase}
        )
        return config
