"""`SynthesizerMaskedLMPreprocessor`: raw strings to masked-LM examples."""

import math

import keras
from keras_synth._hub import keras_hub

from keras_synth.models.preset_utils import PresetPreprocessorMixin
from keras_synth.models.truncation import check_packer
from keras_synth.models.truncation import check_truncation_mode
from keras_synth.models.synthesizer_encoder.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.tokenizers.synthesizer_tokenizer import SynthesizerTokenizer

TRUNCATIONS = ("round_robin", "waterfall")


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerMaskedLMPreprocessor(
    PresetPreprocessorMixin, keras_hub.models.MaskedLMPreprocessor
):
    """Preprocessing of `SynthesizerMaskedLM`: strings to masked examples.

    BERT's masked-LM preprocessing with a `SynthesizerTokenizer`:

    1. tokenize one segment (a sentence) or two (a pair) and pack them as
       `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, padded with `[PAD]` to
       `sequence_length` (`keras_hub.layers.MultiSegmentPacker`);
    2. select `mask_selection_rate` of the tokens, never `[CLS]`, `[SEP]`
       nor `[PAD]`, and replace each selected token by `[MASK]` with
       probability `mask_token_rate`, by a random token of the vocabulary
       with probability `random_token_rate`, and keep it otherwise
       (`keras_hub.layers.MaskedLMMaskGenerator`; BERT's 15%, 80%, 10%,
       10% by default);
    3. return `(x, y, sample_weight)`: `x` a dict of `"token_ids"` (masked),
       `"segment_ids"`, `"padding_mask"` and `"mask_positions"`
       `(batch, mask_selection_length)`, `y` the original ids at the
       mask positions and `sample_weight` 1.0 where a position holds a
       selected token, 0.0 where it pads the list.

    Selections are drawn anew on every call (every epoch of `fit`). In a
    `tf.data` pipeline (as `fit` maps the preprocessor over raw strings) the
    number selected is exactly `ceil(mask_selection_rate * n)` of the `n`
    selectable tokens; called eagerly (keras-hub's Python path) each token
    is selected with probability `mask_selection_rate`.

    Texts longer than `sequence_length - 2` tokens (`- 3` for a pair) are
    cut to fit (for pairs by `truncate`), as `SynthesizerTextClassifierPreprocessor`
    does; count tokens with the tokenizer to check a corpus's lengths.

    Args:
        tokenizer: a `keras_synth.models.SynthesizerTokenizer` (its
            `[MASK]` token replaces the selected tokens).
        sequence_length: int of at least 3, the packed length. Defaults to
            128.
        truncate: `"round_robin"` or `"waterfall"`, how pairs are cut to
            `sequence_length`. Defaults to `"round_robin"`.
        mask_selection_rate: float in [0, 1], the share of the selectable
            tokens selected for prediction. Defaults to 0.15.
        mask_selection_length: int, the length of `mask_positions`, `y` and
            `sample_weight` (the most tokens selected in one example), or
            `None` (the default) for room for the expected selections of a
            full sequence plus three standard deviations,
            `ceil(r * L + 3 * sqrt(L * r * (1 - r)))` for rate `r` and
            length `L` (32 for the defaults). Selections beyond it are
            dropped.
        mask_token_rate: float in [0, 1], the probability that a selected
            token becomes `[MASK]`. Defaults to 0.8.
        random_token_rate: float in [0, 1], the probability that it becomes
            a random token; `mask_token_rate + random_token_rate` must not
            exceed 1 (the rest are kept unchanged). Defaults to 0.1.
        truncation: `"warn"` (default), `"error"` or `"allow"`: what
            happens to texts longer than `sequence_length`, special tokens
            included (a `keras_synth.models.TruncationWarning`, a
            `ValueError`, or silent cutting; see
            `keras_synth.models.truncation` for `tf.data` and exports).
        **kwargs: base layer arguments.

    Call arguments:
        x: a string tensor or list `(batch,)`, or a tuple of two of them
            for sentence pairs (pass a pair as `x=(first, second)`).
        y: must be `None` (the layer makes the labels).
        sample_weight: must be `None`.

    Returns:
        `(x, y, sample_weight)` as above.

    Example:

    >>> vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]",
    ...          "the", "plot", "is", "dull", "."]
    >>> preprocessor = SynthesizerMaskedLMPreprocessor(
    ...     SynthesizerTokenizer(vocab), sequence_length=8,
    ...     mask_selection_rate=0.5, mask_selection_length=4)
    >>> x, y, sample_weight = preprocessor(["the plot is dull ."])
    >>> sorted(x)
    ['mask_positions', 'padding_mask', 'segment_ids', 'token_ids']
    >>> tuple(x["token_ids"].shape), tuple(x["mask_positions"].shape)
    ((1, 8), (1, 4))
    >>> original = [1, 5, 6, 7, 8, 9, 2, 0]
    >>> all(int(label) == original[int(position)] for position, label, weight
    ...     in zip(x["mask_positions"][0], y[0], sample_weight[0]) if weight)
    True
    """

    draws_random = True  # its outputs are random (`TracedPreprocessingMixin`)

    backbone_cls = SynthesizerBackbone
    tokenizer_cls = SynthesizerTokenizer

    def __init__(
        self,
        tokenizer,
        sequence_length=128,
        truncate="round_robin",
        mask_selection_rate=0.15,
        mask_selection_length=None,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        truncation="warn",
        **kwargs,
    ):
        self.truncation = check_truncation_mode(truncation)
        check_masking_args(
            sequence_length=sequence_length, truncate=truncate,
            mask_selection_rate=mask_selection_rate,
            mask_selection_length=mask_selection_length,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate)
        super().__init__(
            tokenizer=tokenizer,
            sequence_length=sequence_length,
            truncate=truncate,
            mask_selection_rate=mask_selection_rate,
            mask_selection_length=mask_selection_length,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate,
            **kwargs,
        )

    # `mask_selection_length=None` is resolved from the current
    # `sequence_length` when the mask generator is built; the config keeps
    # `None`, so a preset loaded with another `sequence_length` gets room
    # for its own length.
    @property
    def mask_selection_length(self):
        """The length of `mask_positions` (resolved when given `None`)."""
        if self._mask_selection_length is not None:
            return self._mask_selection_length
        return default_mask_selection_length(self.mask_selection_rate,
                                             self.sequence_length)

    @mask_selection_length.setter
    def mask_selection_length(self, value):
        self._mask_selection_length = value

    @property
    def sequence_length(self):
        """The packed length of the inputs."""
        return self._sequence_length

    @sequence_length.setter
    def sequence_length(self, value):
        self._sequence_length = value
        if getattr(self, "packer", None) is not None:
            self.packer.sequence_length = value
        masker = getattr(self, "masker", None)
        if masker is not None and masker.mask_selection_length != (
            self.mask_selection_length
        ):
            # The derived length follows (a built layer takes no new
            # sub-layer): the generator reads it on each call, and its
            # TensorFlow selector, which caps the selections, is made anew.
            masker.mask_selection_length = self.mask_selection_length
            reset_selection_cap(masker)

    def build(self, input_shape):
        super().build(input_shape)
        check_packer(self, "packer", truncation=self.truncation)

    def get_config(self):
        config = super().get_config()
        config["mask_selection_length"] = self._mask_selection_length
        config["truncation"] = self.truncation
        return config



def reset_selection_cap(masker):
    """Makes `masker`'s selector cap follow its `mask_selection_length`.

    keras-hub's `MaskedLMMaskGenerator` caps the selections with a
    `tensorflow_text.RandomItemSelector`. Newer keras-hub releases make it
    on the first TensorFlow call (from `None`); older ones (0.20) made it
    in `__init__` and call it as is, so it is made anew here.
    """
    if hasattr(masker, "_maybe_initialize_tf"):
        masker._random_selector = None
        return
    import tensorflow_text as tf_text

    cap = masker.mask_selection_length
    masker._random_selector = tf_text.RandomItemSelector(
        max_selections_per_batch=2**31 - 1 if cap is None else cap,
        selection_rate=masker.mask_selection_rate,
        unselectable_ids=masker.unselectable_token_ids,
    )


def default_mask_selection_length(rate, sequence_length):
    """Room for the selections of a full sequence: the expected number plus
    three standard deviations, at least 1 and at most `sequence_length`."""
    expected = rate * sequence_length
    spread = 3 * math.sqrt(sequence_length * rate * (1 - rate))
    return int(min(sequence_length, max(1, math.ceil(expected + spread))))


def check_masking_args(sequence_length, truncate, mask_selection_length,
                       **rates):
    """ValueError naming the first bad argument of the preprocessor."""
    if not isinstance(sequence_length, int) or isinstance(
        sequence_length, bool
    ) or sequence_length < 3:
        raise ValueError(
            "Argument `sequence_length` must be an int of at least 3 "
            "(`[CLS]`, a token, `[SEP]`). Received: "
            f"sequence_length={sequence_length!r}"
        )
    if truncate not in TRUNCATIONS:
        raise ValueError(
            f"Argument `truncate` must be one of {TRUNCATIONS}. Received: "
            f"truncate={truncate!r}"
        )
    if mask_selection_length is not None and (
        not isinstance(mask_selection_length, int)
        or isinstance(mask_selection_length, bool)
        or mask_selection_length < 1
    ):
        raise ValueError(
            "Argument `mask_selection_length` must be a positive int or "
            f"None. Received: mask_selection_length={mask_selection_length!r}"
        )
    for name, value in rates.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            not 0 <= value <= 1
        ):
            raise ValueError(
                f"Argument `{name}` must be a float in [0, 1]. Received: "
                f"{name}={value!r}"
            )
    total = rates["mask_token_rate"] + rates["random_token_rate"]
    if total > 1 + 1e-9:
        raise ValueError(
            "Arguments `mask_token_rate` + `random_token_rate` must not "
            f"exceed 1 (the rest of the selected tokens are kept). Received: "
            f"mask_token_rate={rates['mask_token_rate']!r}, "
            f"random_token_rate={rates['random_token_rate']!r} (sum {total})"
        )
