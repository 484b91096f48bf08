"""`SynthesizerCausalLMPreprocessor`: raw strings to next-token examples."""

import keras

from keras_synth.layers.block_utils import keras_nlp
from keras_synth.models.synthesizer_causal_lm_backbone import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_char_tokenizer import (
    SynthesizerCharTokenizer,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerCausalLMPreprocessor(keras_nlp.models.CausalLMPreprocessor):
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

    backbone_cls = SynthesizerCausalLMBackbone
    tokenizer_cls = SynthesizerCharTokenizer
