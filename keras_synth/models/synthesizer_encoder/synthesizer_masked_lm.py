"""`SynthesizerMaskedLM`: BERT-style masked language modeling."""

import keras
from keras_synth._hub import keras_hub

from keras_synth.models.preset_utils import PresetTaskMixin
from keras_synth.models.shuffled_fit import ShuffledFitMixin
from keras_synth.models.traced_preprocessing import TracedPreprocessingMixin
from keras_synth.models.quantization import QuantizeMixin
from keras_synth.models.export_formats import TaskExportMixin
from keras_synth.models.synthesizer_encoder.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.synthesizer_encoder.synthesizer_masked_lm_preprocessor import (  # noqa: E501
    SynthesizerMaskedLMPreprocessor,
)
from keras_synth.models.synthesizer_encoder.synthesizer_text_classifier import (
    check_sequence_length,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerMaskedLM(
    PresetTaskMixin, QuantizeMixin, ShuffledFitMixin, TracedPreprocessingMixin,
    TaskExportMixin,
    keras_hub.models.MaskedLM
):
    """Masked language modeling (BERT's pretraining) with a `SynthesizerBackbone`.

    Predicts the original tokens at `mask_positions` from the backbone's
    `sequence_output`: keras-hub's `MaskedLMHead` (a dense layer with the
    backbone's activation, layer normalization, then the output projection
    TIED to the backbone's token embedding,
    `backbone.embeddings.token_embedding`, plus a bias). The logits
    `(batch, mask_selection_length, vocabulary_size)` are float32, also
    under mixed precision (a float32 head). With a `SynthesizerMaskedLMPreprocessor`, `fit`
    and `evaluate` take raw strings (masked anew each epoch).

    `compile()` defaults to keras-hub's `MaskedLM` ones (Adam at `5e-5`, a
    weighted `SparseCategoricalAccuracy`), except that the `"auto"` loss is
    the mean cross-entropy over the selected positions
    (`SparseCategoricalCrossentropy(from_logits=True,
    reduction="mean_with_sample_weight")`): the preprocessor's
    `sample_weight` is 0 on the positions that pad `mask_positions`, and
    the loss (its log-perplexity) does not depend on how many pad.

    The backbone of a saved preset loads into a new task with its weights,
    e.g. `SynthesizerTextClassifier.from_preset(path, num_classes=2)`
    (a new head; the preprocessor from the preset's tokenizer and
    `sequence_length`).

    Args:
        backbone: a `keras_synth.models.SynthesizerBackbone`.
        preprocessor: a `SynthesizerMaskedLMPreprocessor` or `None` (inputs
            already preprocessed); its `sequence_length` may not exceed the
            backbone's `max_sequence_length`.
        **kwargs: `keras_hub.models.Task` arguments (`name`, ...).

    Call arguments:
        inputs: the backbone's input dict plus `"mask_positions"`, int
            `(batch, mask_selection_length)`.

    Returns:
        Float32 logits `(batch, mask_selection_length, vocabulary_size)`.

    Example:

    >>> from keras_synth.models import (
    ...     SynthesizerBackbone, SynthesizerMaskedLMPreprocessor,
    ...     SynthesizerTokenizer, learn_wordpiece_vocabulary)
    >>> texts = ["the plot is dull .", "a grand , moving film ."] * 4
    >>> vocab = learn_wordpiece_vocabulary(texts, 200)
    >>> preprocessor = SynthesizerMaskedLMPreprocessor(
    ...     SynthesizerTokenizer(vocab), sequence_length=12)
    >>> backbone = SynthesizerBackbone(
    ...     vocabulary_size=len(vocab), num_layers=1, num_heads=2,
    ...     hidden_dim=16, intermediate_dim=32, synthesizer="random",
    ...     max_sequence_length=12)
    >>> masked_lm = SynthesizerMaskedLM(backbone, preprocessor=preprocessor)
    >>> masked_lm.compile(optimizer="adam")
    >>> history = masked_lm.fit(x=texts, batch_size=4, epochs=1, verbose=0)
    >>> x, y, sample_weight = preprocessor(texts[:2])
    >>> tuple(masked_lm(x).shape) == (2, preprocessor.mask_selection_length,
    ...                                len(vocab))
    True
    """

    backbone_cls = SynthesizerBackbone
    preprocessor_cls = SynthesizerMaskedLMPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        check_sequence_length(preprocessor, backbone)
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        # A float32 head: float32 logits, also under mixed precision (the
        # tied projection itself runs in the embedding's compute dtype).
        # With the backbone's mixed policy, keras-hub's head would add its
        # float32 bias to bfloat16 logits, which TensorFlow refuses.
        self.masked_lm_head = keras_hub.layers.MaskedLMHead(
            token_embedding=backbone.embeddings.token_embedding,
            intermediate_activation=keras.activations.get(
                backbone.activation),
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            dtype="float32",
            name="mlm_head",
        )

        # === Functional model ===
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(
                shape=(None,), dtype="int32", name="mask_positions"
            ),
        }
        sequence_output = backbone(backbone.input)["sequence_output"]
        outputs = self.masked_lm_head(sequence_output,
                                      inputs["mask_positions"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def compile(self, optimizer="auto", loss="auto", *,
                weighted_metrics="auto", **kwargs):
        """`MaskedLM.compile`; the `"auto"` loss is the mean cross-entropy
        over the selected positions (see the class docstring)."""
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight")
        super().compile(optimizer=optimizer, loss=loss,
                        weighted_metrics=weighted_metrics, **kwargs)
