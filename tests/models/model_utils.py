"""Tiny data and models for the tests of keras_synth.models."""

import keras
import numpy as np

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerTextClassifier
from keras_synth.models import SynthesizerTextClassifierPreprocessor
from keras_synth.models import SynthesizerTokenizer

POSITIVE = ["a grand , moving film .", "the cast is superb .",
            "warm , funny and wise .", "a moving and superb story ."]
NEGATIVE = ["the plot is dull .", "a boring , tired mess .",
            "dull and far too long .", "the cast is tired and boring ."]
TEXTS = POSITIVE + NEGATIVE
LABELS = np.array([1] * len(POSITIVE) + [0] * len(NEGATIVE), "int32")

# A fixed vocabulary (no learner needed): the reserved tokens, the words
# of TEXTS, a few word pieces.
VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"] + sorted(
    {w for t in TEXTS for w in t.split()}
) + ["##s", "##ly"]


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def backbone_inputs(batch=2, length=10, vocabulary_size=len(VOCAB), seed=0,
                    lengths=None):
    """A random input dict; `lengths` real tokens per row (the rest pads)."""
    rng = np.random.default_rng(seed)
    lengths = lengths or [length] * batch
    mask = np.arange(length)[None, :] < np.array(lengths)[:, None]
    token_ids = rng.integers(5, vocabulary_size, (batch, length))
    return {
        "token_ids": np.where(mask, token_ids, 0).astype("int32"),
        "segment_ids": np.where(np.arange(length) >= length // 2, 1, 0)[
            None].repeat(batch, 0).astype("int32") * mask,
        "padding_mask": mask.astype("int32"),
    }


def make_backbone(synthesizer="random+vanilla", max_sequence_length=16,
                  **kwargs):
    config = dict(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2,
                  hidden_dim=16, intermediate_dim=32, dropout=0.0,
                  synthesizer=synthesizer,
                  max_sequence_length=max_sequence_length)
    config.update(kwargs)
    return SynthesizerBackbone(**config)


def make_classifier(synthesizer="random+vanilla", num_classes=2,
                    sequence_length=16, num_segments=1, **kwargs):
    preprocessor = SynthesizerTextClassifierPreprocessor(
        SynthesizerTokenizer(VOCAB), sequence_length=sequence_length)
    backbone = make_backbone(synthesizer, sequence_length,
                             num_segments=num_segments, **kwargs)
    return SynthesizerTextClassifier(backbone, num_classes=num_classes,
                                     preprocessor=preprocessor, dropout=0.0)
