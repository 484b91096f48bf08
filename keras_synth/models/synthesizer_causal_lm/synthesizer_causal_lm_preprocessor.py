"""`SynthesizerCausalLMPreprocessor`: raw strings to next-token examples."""

import keras
import numpy as np

from keras_synth._hub import keras_hub
from keras_synth.models.synthesizer_causal_lm.synthesizer_causal_lm_backbone import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.tokenizers.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)
from keras_synth.models.truncation import CheckedPacker
from keras_synth.models.truncation import check_packer
from keras_synth.models.truncation import check_truncation_mode


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerCausalLMPreprocessor(keras_hub.models.CausalLMPreprocessor):
    """Tokenizes and packs text for `SynthesizerCausalLM`.

    keras-hub's `CausalLMPreprocessor`: each string becomes `[CLS]` +
    tokens + `[SEP]`, padded or cut to `sequence_length + 1`; the features
    are all but the last token, the labels all but the first, weighted by
    the padding mask. `generate_preprocess` leaves the end open and
    `generate_postprocess` strips the reserved tokens. Any tokenizer with
    start, end and pad tokens works: a `SynthesizerCharTokenizer`
    (character-level language modelling) or the WordPiece
    `SynthesizerTokenizer`.

    Args:
        tokenizer: the tokenizer.
        sequence_length: int, the packed length. Defaults to 1024.
        add_start_token: bool, prepend `[CLS]`. Defaults to True.
        add_end_token: bool, append `[SEP]`. Defaults to True.
        truncation: `"warn"` (default), `"error"` or `"allow"`: what
            happens to training texts longer than `sequence_length`, special tokens
            included (a `keras_synth.models.TruncationWarning`, a
            `ValueError`, or silent cutting; see
            `keras_synth.models.truncation` for `tf.data` and exports).
            Prompts of `generate_preprocess` are never cut: a prompt
            that fills the context leaves no room to generate and raises
            a `ValueError` naming its length and the context.

    Call arguments:
        x: a string or strings.
        y, sample_weight: must be `None` (labels come from `x`).
        sequence_length: optional override of `sequence_length`.

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `token_ids` and
        `padding_mask`.

    Example:

    >>> tokenizer = SynthesizerCharTokenizer(
    ...     SynthesizerCharTokenizer.learn_vocabulary(["abc"]))
    >>> preprocessor = SynthesizerCausalLMPreprocessor(
    ...     tokenizer, sequence_length=5)
    >>> x, y, w = preprocessor(["ab"])
    >>> to_list = lambda t: keras.ops.convert_to_numpy(t).tolist()
    >>> to_list(x["token_ids"]), to_list(y)
    ([[1, 4, 5, 2, 0]], [[4, 5, 2, 0, 0]])
    """

    draws_random = False  # deterministic: traced once (`TracedPreprocessingMixin`)

    backbone_cls = SynthesizerCausalLMBackbone
    tokenizer_cls = SynthesizerCharTokenizer

    def __init__(self, tokenizer, sequence_length=1024, add_start_token=True,
                 add_end_token=True, truncation="warn", **kwargs):
        self.truncation = check_truncation_mode(truncation)
        super().__init__(
            tokenizer,
            sequence_length=sequence_length,
            add_start_token=add_start_token,
            add_end_token=add_end_token,
            **kwargs,
        )

    def get_config(self):
        config = super().get_config()
        config["truncation"] = self.truncation
        return config

    def build(self, input_shape):
        # keras-hub's packer prepends the start token in `generate_preprocess`
        # whatever `add_start_token` says; a model trained without one (a
        # contiguous character stream) must not see it in its prompts.
        start_value = self.tokenizer.start_token_id
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=start_value if self.add_start_token else None,
            end_value=self.tokenizer.end_token_id,
            pad_value=self.tokenizer.pad_token_id,
            sequence_length=self.sequence_length,
            return_padding_mask=True,
        )
        # Training packs `sequence_length + 1` tokens (features and labels
        # shifted by one): reported as `sequence_length`.
        check_packer(self, "packer", truncation=self.truncation, offset=1)
        self.built = True

    def generate_preprocess(self, x, sequence_length=None):
        """Tokenizes prompts for `generate()`; each must keep a token.

        The start token is prepended only with `add_start_token=True`.
        Without it an empty prompt leaves nothing to continue from and is
        refused: a `ValueError` eagerly, an `InvalidArgumentError` inside a
        `tf.function` (an exported model).
        """
        if not self.built:
            self.build(None)
        packer = self.packer
        self.packer = CheckedPacker(
            packer.packer, "error", what="prompt",
            argument=(
                "`max_length` of `generate()`, default the preprocessor's "
                "`sequence_length`"
            ),
            room=True,
        )
        try:
            outputs = super().generate_preprocess(
                x, sequence_length=sequence_length
            )
        finally:
            self.packer = packer
        if not self.add_start_token:
            outputs = check_prompts_not_empty(outputs)
        return outputs


def check_prompts_not_empty(outputs):
    """Raises if a row of `outputs["padding_mask"]` has no token (an empty
    prompt); returns `outputs`, in a `tf.function` made to wait for the
    check, so that it fails before generation reads the empty row."""
    padding_mask = outputs["padding_mask"]
    message = (
        "Argument `x` of `generate()` holds an empty prompt; the "
        "preprocessor adds no start token (`add_start_token=False`), so "
        "each prompt needs at least one token to continue from."
    )
    import tensorflow as tf

    if tf.is_tensor(padding_mask) and tf.is_symbolic_tensor(padding_mask):
        lengths = tf.reduce_sum(tf.cast(padding_mask, "int32"), axis=-1)
        check = tf.debugging.assert_positive(lengths, message=message)
        with tf.control_dependencies([check]):
            return {key: tf.identity(value) for key, value in outputs.items()}
    mask = np.asarray(keras.ops.convert_to_numpy(padding_mask))
    lengths = np.sum(mask.astype("int32"), axis=-1)
    empty = np.flatnonzero(np.reshape(lengths, [-1]) == 0)
    if empty.size:
        raise ValueError(
            f"{message} Received: empty prompt(s) at index "
            f"{empty.tolist()}."
        )
    return outputs

