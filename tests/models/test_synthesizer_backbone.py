import keras
import keras_hub
import numpy as np
import pytest

from keras_synth.models import SynthesizerBackbone
from tests.models.model_utils import VOCAB
from tests.models.model_utils import backbone_inputs
from tests.models.model_utils import make_backbone
from tests.models.model_utils import to_numpy

VARIANTS = ["vanilla", "dense", "random", "factorized_random",
            "random+vanilla", "light_conv", "dynamic_conv+vanilla"]


@pytest.mark.parametrize("synthesizer", VARIANTS)
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_output_shapes_and_pooling(synthesizer, pooling):
    backbone = make_backbone(synthesizer, pooling=pooling, num_segments=2)
    inputs = backbone_inputs(batch=3, length=11, lengths=[11, 6, 2])
    outputs = backbone(inputs)
    sequence = to_numpy(outputs["sequence_output"])
    pooled = to_numpy(outputs["pooled_output"])
    assert sequence.shape == (3, 11, 16) and pooled.shape == (3, 16)
    if pooling == "cls":
        expected = sequence[:, 0]
    else:
        mask = inputs["padding_mask"][..., None]
        expected = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(pooled, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("synthesizer", ["random+vanilla", "dense"])
def test_padding_does_not_change_real_tokens(synthesizer):
    """A row padded to 12 equals the same row cut to its 7 tokens (batches
    are cut to their longest sequence, so both shapes are used)."""
    backbone = make_backbone(synthesizer, num_segments=2)
    inputs = backbone_inputs(batch=1, length=12, lengths=[7])
    short = {k: v[:, :7] for k, v in inputs.items()}
    long_out, short_out = backbone(inputs), backbone(short)
    np.testing.assert_allclose(
        to_numpy(long_out["sequence_output"])[:, :7],
        to_numpy(short_out["sequence_output"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(long_out["pooled_output"]),
                               to_numpy(short_out["pooled_output"]),
                               rtol=1e-5, atol=1e-5)


def test_segment_embedding_only_for_pairs():
    inputs = backbone_inputs(batch=2, length=8)
    flipped = dict(inputs, segment_ids=1 - inputs["segment_ids"])
    single = make_backbone(num_segments=1)
    assert single.segment_embedding is None
    np.testing.assert_allclose(
        to_numpy(single(inputs)["pooled_output"]),
        to_numpy(single(flipped)["pooled_output"]), rtol=1e-6)
    pair = make_backbone(num_segments=2)
    assert not np.allclose(to_numpy(pair(inputs)["pooled_output"]),
                           to_numpy(pair(flipped)["pooled_output"]))


def test_attention_scores():
    backbone = make_backbone("random+vanilla", num_layers=3)
    inputs = backbone_inputs(batch=2, length=9, lengths=[9, 4])
    scores = [to_numpy(s) for s in backbone.attention_scores(inputs)]
    assert len(scores) == 3
    for score in scores:
        assert score.shape == (2, 2, 9, 9)
        np.testing.assert_allclose(score[1, :, :4, :4].sum(-1), 1.0,
                                   rtol=1e-5)
        np.testing.assert_array_equal(score[1, :, :, 4:], 0.0)


def keras_hub_stack(ours):
    """keras-hub's own TransformerEncoder blocks behind the same embeddings,
    holding `ours`' weights."""
    token_ids = keras.Input((None,), dtype="int32")
    segment_ids = keras.Input((None,), dtype="int32")
    padding_mask = keras.Input((None,), dtype="int32")
    embedding = keras_hub.layers.TokenAndPositionEmbedding(
        ours.vocabulary_size, ours.max_sequence_length, ours.hidden_dim)
    segments = keras.layers.Embedding(ours.num_segments, ours.hidden_dim)
    norm = keras.layers.LayerNormalization(epsilon=1e-5)
    blocks = [keras_hub.layers.TransformerEncoder(
        ours.intermediate_dim, ours.num_heads, activation="relu",
        layer_norm_epsilon=1e-5) for _ in range(ours.num_layers)]
    x = norm(embedding(token_ids) + segments(segment_ids))
    for block in blocks:
        x = block(x, padding_mask=padding_mask)
    model = keras.Model([token_ids, segment_ids, padding_mask], x)
    pairs = [(embedding, ours.embeddings), (segments, ours.segment_embedding),
             (norm, ours.embeddings_layer_norm)]
    pairs += list(zip(blocks, ours.transformer_layers))
    for theirs, mine in pairs:
        # Same weights in the same order (ours nest the dot-product
        # attention's projections under "vanilla/").
        names = [w.path.split("/", 1)[1] for w in theirs.weights]
        assert names == [w.path.split("/", 1)[1].replace("vanilla/", "")
                         for w in mine.weights]
        theirs.set_weights(mine.get_weights())
    return model


def test_vanilla_equals_keras_hub_transformer_encoders():
    ours = make_backbone("vanilla", num_segments=2, num_layers=3)
    theirs = keras_hub_stack(ours)
    inputs = backbone_inputs(batch=3, length=10, lengths=[10, 7, 3])
    expected = to_numpy(theirs([inputs["token_ids"], inputs["segment_ids"],
                                inputs["padding_mask"]]))
    got = to_numpy(ours(inputs)["sequence_output"])
    mask = inputs["padding_mask"].astype(bool)
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5,
                               atol=1e-5)


def test_config_round_trip():
    backbone = make_backbone("factorized_random", pooling="cls",
                             num_segments=2,
                             synthesizer_options={"rank": 3})
    restored = SynthesizerBackbone.from_config(backbone.get_config())
    restored.set_weights(backbone.get_weights())
    assert restored.get_config() == backbone.get_config()
    inputs = backbone_inputs()
    np.testing.assert_allclose(
        to_numpy(restored(inputs)["pooled_output"]),
        to_numpy(backbone(inputs)["pooled_output"]), rtol=1e-6)


@pytest.mark.parametrize("name, value, match", [
    ("num_layers", 0, "num_layers"),
    ("hidden_dim", 15, "divisible"),
    ("pooling", "max", "pooling"),
    ("max_sequence_length", None, "max_sequence_length"),
])
def test_bad_arguments(name, value, match):
    with pytest.raises(ValueError, match=match):
        make_backbone(**{name: value})


def test_vocabulary_size_is_the_embedding_size():
    backbone = make_backbone()
    assert backbone.embeddings.token_embedding.input_dim == len(VOCAB)


def test_a_subclass_makes_the_blocks_through_encoder_block():
    """`_encoder_block` is where the blocks come from: a subclass gets its
    own block class, built from the backbone's arguments."""
    from keras_synth.layers import SynthesizerEncoder

    class TaggedEncoder(SynthesizerEncoder):
        pass

    seen = []

    class Tagged(SynthesizerBackbone):
        def _encoder_block(self, **kwargs):
            seen.append(kwargs["name"])
            return TaggedEncoder(**kwargs)

    backbone = Tagged(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2,
                      hidden_dim=8, intermediate_dim=16,
                      synthesizer="random", max_sequence_length=6)
    assert seen == ["encoder_0", "encoder_1"]
    assert all(type(b) is TaggedEncoder for b in backbone.transformer_layers)
    assert backbone.transformer_layers[0].synthesizer == "random"
    outputs = backbone(backbone_inputs(batch=2, length=6, lengths=[6, 3]))
    assert tuple(outputs["pooled_output"].shape) == (2, 8)
