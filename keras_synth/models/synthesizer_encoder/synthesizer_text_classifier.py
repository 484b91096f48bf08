"""`SynthesizerTextClassifier` and its SavedModel export."""

import keras

from keras_synth._hub import keras_hub

from keras_synth.models.synthesizer_encoder.synthesizer_backbone import SynthesizerBackbone
from keras_synth.models.preset_utils import PresetTaskMixin
from keras_synth.models.shuffled_fit import ShuffledFitMixin
from keras_synth.models.traced_preprocessing import TracedPreprocessingMixin
from keras_synth.models.quantization import QuantizeMixin
from keras_synth.models.export_formats import TaskExportMixin
from keras_synth.layers.keras_utils import tracing_for_export
from keras_synth.models.synthesizer_encoder.synthesizer_text_classifier_preprocessor import (
    SynthesizerTextClassifierPreprocessor,
)


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerTextClassifier(
    PresetTaskMixin, QuantizeMixin, ShuffledFitMixin, TracedPreprocessingMixin,
    TaskExportMixin,
    keras_hub.models.TextClassifier
):
    """Text classification (or regression) with a `SynthesizerBackbone`.

    The backbone's `pooled_output`, dropout and a dense head of
    `num_classes` logits (float32). With a `preprocessor`, `fit`,
    `evaluate` and `predict` take raw strings (one sentence, or a tuple of
    two for pairs); without one they take the backbone's input dict. With
    `num_classes=1` it is a regressor (STS-B-like scores): `compile()`'s
    `"auto"` loss is then the mean squared error.

    Args:
        backbone: a `keras_synth.models.SynthesizerBackbone`.
        num_classes: int, the number of classes (1 for regression).
        preprocessor: a `SynthesizerTextClassifierPreprocessor` or `None`
            (inputs already preprocessed); its `sequence_length` may not
            exceed the backbone's `max_sequence_length`.
        activation: the output activation: `None` (logits, the default) or
            `"softmax"`.
        dropout: float, dropout before the head. Defaults to 0.1.
        **kwargs: `keras_hub.models.Task` arguments (`name`, ...).

    Example:

    >>> import numpy as np
    >>> from keras_synth.models import (
    ...     SynthesizerBackbone, SynthesizerTextClassifierPreprocessor,
    ...     SynthesizerTokenizer, learn_wordpiece_vocabulary)
    >>> texts = ["the plot is dull .", "a grand , moving film ."] * 8
    >>> vocab = learn_wordpiece_vocabulary(texts, 200)
    >>> preprocessor = SynthesizerTextClassifierPreprocessor(
    ...     SynthesizerTokenizer(vocab), sequence_length=16)
    >>> backbone = SynthesizerBackbone(
    ...     vocabulary_size=len(vocab), num_layers=1, num_heads=2,
    ...     hidden_dim=16, intermediate_dim=32, synthesizer="random",
    ...     max_sequence_length=16)
    >>> classifier = SynthesizerTextClassifier(
    ...     backbone, num_classes=2, preprocessor=preprocessor)
    >>> classifier.compile(optimizer="adam")
    >>> history = classifier.fit(x=texts, y=np.array([0, 1] * 8),
    ...                          batch_size=8, epochs=1, verbose=0)
    >>> classifier.predict(["a dull plot ."], verbose=0).shape
    (1, 2)
    """

    backbone_cls = SynthesizerBackbone
    preprocessor_cls = SynthesizerTextClassifierPreprocessor

    def __init__(self, backbone, num_classes, preprocessor=None,
                 activation=None, dropout=0.1, **kwargs):
        if not isinstance(num_classes, int) or isinstance(
            num_classes, bool
        ) or num_classes < 1:
            raise ValueError(
                "Argument `num_classes` must be a positive int (1 for "
                f"regression). Received: num_classes={num_classes!r}"
            )
        check_sequence_length(preprocessor, backbone)
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="head_dropout"
        )
        # float32 logits, also under mixed precision.
        self.output_dense = keras.layers.Dense(
            num_classes, activation=activation, dtype="float32",
            name="logits",
        )

        # === Functional model ===
        inputs = backbone.input
        pooled = backbone(inputs)["pooled_output"]
        outputs = self.output_dense(self.output_dropout(pooled))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.activation = keras.activations.get(activation)
        self.dropout = dropout

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto",
                **kwargs):
        """`TextClassifier.compile`; for `num_classes=1` the `"auto"` loss
        is `MeanSquaredError` and the `"auto"` metric the mean absolute
        error."""
        if self.output_dense.units == 1:  # (called before num_classes is set)
            if loss == "auto":
                loss = keras.losses.MeanSquaredError()
            if metrics == "auto":
                metrics = [keras.metrics.MeanAbsoluteError(name="mae")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
            }
        )
        return config


def check_sequence_length(preprocessor, backbone):
    """ValueError when `preprocessor` packs longer inputs than `backbone`
    takes."""
    length = getattr(preprocessor, "sequence_length", None)
    if length is not None and length > backbone.max_sequence_length:
        raise ValueError(
            f"The preprocessor's `sequence_length`={length} exceeds the "
            "backbone's `max_sequence_length`="
            f"{backbone.max_sequence_length}. Build the preprocessor with "
            f"sequence_length <= {backbone.max_sequence_length}."
        )


def export_text_classifier(classifier, path, label_names=None,
                           input_names=None):
    """Writes a SavedModel of `classifier` that takes raw strings.

    Its `serving_default` signature (and the endpoint `serve`) takes string
    tensors `(batch,)` named `input_names` (default `("sentence",)`; give two
    names for sentence pairs) and returns `probabilities (batch, classes)`,
    `label (batch,)` (class index) and, with `label_names`, `label_name`;
    or `score (batch,)` for a regressor (`num_classes=1`); and `truncated
    (batch,)`, True where the input (the pair with its special tokens) was
    longer than the preprocessor's `sequence_length` and was cut. With the
    preprocessor's `truncation="error"` such inputs fail the call
    (`InvalidArgumentError`) instead; `"warn"` cannot warn inside a
    SavedModel and relies on `truncated`. Tokenization and packing run
    inside the graph. Needs the TensorFlow backend. Load it with
    `keras_synth.models.load_export(path)`.

    Args:
        classifier: a `SynthesizerTextClassifier` with a preprocessor.
        path: the SavedModel folder.
        label_names: optional list of `num_classes` label strings.
        input_names: names of the string inputs, one or two.

    Returns:
        `path`.
    """
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "export_text_classifier writes a TensorFlow SavedModel and needs "
            f"KERAS_BACKEND=tensorflow; the backend is "
            f"{keras.backend.backend()!r}."
        )
    if classifier.preprocessor is None:
        raise ValueError(
            "Argument `classifier` has no preprocessor; a SavedModel that "
            "takes raw strings needs one."
        )
    input_names = tuple(input_names or ("sentence",))
    if len(input_names) not in (1, 2):
        raise ValueError(
            "Argument `input_names` must name one or two string inputs. "
            f"Received: input_names={input_names!r}"
        )
    regression = classifier.num_classes == 1
    if label_names is not None and (
        regression or len(label_names) != classifier.num_classes
    ):
        raise ValueError(
            f"Argument `label_names` must hold num_classes="
            f"{classifier.num_classes} strings (none for a regressor). "
            f"Received: label_names={label_names!r}"
        )
    preprocessor = classifier.preprocessor
    for layer in (preprocessor, preprocessor.tokenizer):
        if not layer.built:  # (tokenizers build on their first call)
            layer.build(None)
    softmax = classifier.activation == keras.activations.softmax

    def serve(*texts):
        # `x=`: a positional 2-tuple would be read as `(x, y)`.
        inputs = preprocessor(x=tuple(texts))
        outputs = tf.cast(classifier(inputs, training=False), tf.float32)
        lengths = preprocessor.packer.lengths(
            tuple(preprocessor.tokenizer(t) for t in texts)
        )
        truncated = lengths > preprocessor.sequence_length
        if regression:
            return {"score": tf.reshape(outputs, [-1]), "truncated": truncated}
        probabilities = outputs if softmax else tf.nn.softmax(outputs, -1)
        label = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        results = {
            "probabilities": probabilities,
            "label": label,
            "truncated": truncated,
        }
        if label_names is not None:
            names = tf.constant([str(n) for n in label_names], tf.string)
            results["label_name"] = tf.gather(names, label)
        return results

    archive = keras.export.ExportArchive()
    archive.track(classifier)
    archive.track(preprocessor)
    archive.track(preprocessor.tokenizer)
    with tracing_for_export():
        archive.add_endpoint(
            "serve",
            serve,
            input_signature=[
                tf.TensorSpec([None], tf.string, name=name)
                for name in input_names
            ],
        )
        archive.write_out(path, verbose=False)
    return path
