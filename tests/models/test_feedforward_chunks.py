"""`feedforward_chunk_size` on the three backbones: passed to every block,
saved in the config, and the same outputs as the backbone without chunks
(the same weights, 2 x 10 tokens in chunks of 3: the chunks run)."""

import keras
import numpy as np
import pytest

from keras_synth.models import SynthesizerBackbone
from keras_synth.models import SynthesizerCausalLMBackbone
from keras_synth.models import SynthesizerSeq2SeqBackbone

SIZES = dict(vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8,
             intermediate_dim=16, max_sequence_length=10,
             synthesizer="factorized_random", dropout=0.0)
CHUNK = 3


def inputs(cls):
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 20, (2, 10)).astype("int32")
    mask = np.ones((2, 10), "int32")
    if cls is SynthesizerSeq2SeqBackbone:
        return {"encoder_token_ids": ids, "encoder_padding_mask": mask,
                "decoder_token_ids": ids[:, ::-1].copy(),
                "decoder_padding_mask": mask}
    x = {"token_ids": ids, "padding_mask": mask}
    if cls is SynthesizerBackbone:
        x["segment_ids"] = np.zeros_like(ids)
    return x


def blocks_of(backbone):
    return [layer for layer in backbone.layers
            if hasattr(layer, "feedforward_chunk_size")]


@pytest.mark.parametrize("cls", [SynthesizerBackbone,
                                 SynthesizerCausalLMBackbone,
                                 SynthesizerSeq2SeqBackbone])
def test_backbone_chunks_equal_whole(cls):
    plain = cls(**SIZES)
    chunked = cls(**SIZES, feedforward_chunk_size=CHUNK)
    chunked.set_weights(plain.get_weights())
    assert blocks_of(chunked) and all(
        b.feedforward_chunk_size == CHUNK for b in blocks_of(chunked))
    x = inputs(cls)
    want, got = plain(x), chunked(x)
    if not isinstance(want, dict):
        want, got = {"out": want}, {"out": got}
    for name in want:
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got[name]),
                                   keras.ops.convert_to_numpy(want[name]),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
    config = chunked.get_config()
    assert config["feedforward_chunk_size"] == CHUNK
    restored = cls.from_config(config)
    assert all(b.feedforward_chunk_size == CHUNK for b in blocks_of(restored))
    assert plain.get_config()["feedforward_chunk_size"] is None


def test_backbone_with_dropout_trains():
    """The backbones' default dropout (0.1) in the chunks: a causal LM's
    compiled `fit`."""
    from keras_synth.models import SynthesizerCausalLM

    backbone = SynthesizerCausalLMBackbone(
        **dict(SIZES, dropout=0.1), feedforward_chunk_size=CHUNK)
    model = SynthesizerCausalLM(backbone=backbone, preprocessor=None)
    x = inputs(SynthesizerCausalLMBackbone)
    history = model.fit(x, x["token_ids"], epochs=2, batch_size=2,
                        verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="one backend's converters suffice: the chunks "
                    "are the same `keras.ops` on every backend")
@pytest.mark.parametrize("format", ["onnx", "litert"])
def test_export_with_chunks(format, tmp_path):
    """ONNX and LiteRT files of a classifier whose blocks run in chunks
    (16 tokens in chunks of 5: a loop and a last, shorter chunk) give
    Keras's probabilities."""
    from keras_synth.models import SynthesizerTextClassifier
    from keras_synth.models import export_model
    from tests.models import export_utils as eu
    from tests.models.model_utils import backbone_inputs
    from tests.models.model_utils import make_backbone

    if eu.runtime_missing(format):
        pytest.skip(f"reloading {format} needs `{eu.runtime_missing(format)}`")
    keras.utils.set_random_seed(0)
    x = backbone_inputs(eu.BATCH, eu.LENGTH,
                        lengths=[eu.LENGTH, eu.LENGTH - 3])
    model = SynthesizerTextClassifier(
        make_backbone("factorized_random", eu.LENGTH,
                      feedforward_chunk_size=5),
        num_classes=3, preprocessor=None, dropout=0.0, activation="softmax")
    want = np.asarray(model.predict(x, verbose=0))
    path = str(tmp_path / ("model.onnx" if format == "onnx" else
                           "model.tflite"))
    export_model(model, path, format, batch_size=eu.BATCH,
                 num_predictions=eu.PREDICTIONS)
    got = (eu.run_onnx if format == "onnx" else eu.run_litert)(path, x)
    [got] = got.values()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
