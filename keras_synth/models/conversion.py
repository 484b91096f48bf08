"""`convert_keras_hub_backbone`: a keras-hub BERT or GPT-2 backbone as a
Synthesizer backbone that computes what it computes.

The source's embeddings, norms, feedforward networks and attention
projections are copied into the target's `"vanilla"` component; the other
components of a mixture such as `"random+vanilla"` are set to zero logits
(`Synthesizer.zero_logits`), and the vanilla query projection is divided by
vanilla's mixture weight, so that right after conversion the mixture's
logits are the source's dot-product logits. Training then learns how much
synthesized attention to mix in (the zeroed components keep non-zero
gradients).
"""

import numpy as np
from keras import ops

from keras_synth._hub import keras_hub
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.models.synthesizer_causal_lm import (
    SynthesizerCausalLMBackbone,
)
from keras_synth.models.synthesizer_encoder import SynthesizerBackbone


def convert_keras_hub_backbone(backbone, synthesizer="random+vanilla",
                               synthesizer_options=None):
    """Converts a keras-hub `BertBackbone` or `GPT2Backbone` to a Synthesizer
    backbone with the same outputs.

    A `keras_hub.models.BertBackbone` becomes a
    `keras_synth.models.SynthesizerBackbone` (post-LN, BERT's pooler as
    `pooling="cls_dense"`, its activation, `layer_norm_epsilon`, dropout,
    `num_segments` and `max_sequence_length`); a
    `keras_hub.models.GPT2Backbone` becomes a
    `keras_synth.models.SynthesizerCausalLMBackbone` (pre-LN with GPT-2's
    final norm). Token, position and segment embeddings, every layer
    normalization, the feedforward networks and the attention's query, key,
    value and output projections are copied (the dtype policy is the
    source's).

    `synthesizer` must have a `"vanilla"` component (plain `"vanilla"`, or
    a mixture such as `"random+vanilla"`): the source's attention goes
    there. The other components get zero logits (each variant's
    `Synthesizer.zero_logits`; a user-registered variant supports
    conversion by implementing it), and vanilla's query projection is
    divided by its per-head mixture weight, so that the converted backbone
    computes what the source computes (to float rounding). The mixture
    weights and the synthesizers' weights keep non-zero gradients:
    fine-tuning learns how much synthesized attention to mix in.

    Args:
        backbone: a `keras_hub.models.BertBackbone` or
            `keras_hub.models.GPT2Backbone` (e.g. from `from_preset`).
        synthesizer: the target's attention variants, with `"vanilla"`
            among them. Defaults to `"random+vanilla"`.
        synthesizer_options: dict of the variants' options, as the
            backbones take them (e.g. `{"rank": 4}`).

    Returns:
        The new `SynthesizerBackbone` or `SynthesizerCausalLMBackbone`.

    Raises:
        TypeError: for a `backbone` of another class.
        ValueError: for a `synthesizer` without `"vanilla"`, a source
            whose layout the target cannot hold (attention head sizes,
            block norms), or a `max_sequence_length` or option that the
            synthesizer cannot use.
        NotImplementedError: for a variant without `zero_logits`.

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> bert = keras_hub.models.BertBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=32, max_sequence_length=16)
    >>> converted = convert_keras_hub_backbone(bert, "random+vanilla")
    >>> type(converted).__name__, converted.synthesizer, converted.pooling
    ('SynthesizerBackbone', 'random+vanilla', 'cls_dense')
    >>> inputs = {"token_ids": np.arange(16).reshape(2, 8) + 1,
    ...           "segment_ids": np.zeros((2, 8), "int32"),
    ...           "padding_mask": np.ones((2, 8), "int32")}
    >>> ours, theirs = converted(inputs), bert(inputs)
    >>> bool(np.allclose(ops.convert_to_numpy(ours["pooled_output"]),
    ...                  ops.convert_to_numpy(theirs["pooled_output"]),
    ...                  atol=1e-5))
    True
    """
    check_synthesizer(synthesizer)
    if isinstance(backbone, keras_hub.models.BertBackbone):
        return convert_bert(backbone, synthesizer, synthesizer_options)
    if isinstance(backbone, keras_hub.models.GPT2Backbone):
        return convert_gpt2(backbone, synthesizer, synthesizer_options)
    raise TypeError(
        "Argument `backbone` must be a keras_hub.models.BertBackbone or "
        "keras_hub.models.GPT2Backbone. Received: backbone of type "
        f"{type(backbone).__name__}"
    )


def check_synthesizer(synthesizer):
    """The variants of `synthesizer`; ValueError without `"vanilla"`."""
    variants = parse_synthesizer(synthesizer)
    if "vanilla" not in variants:
        raise ValueError(
            "Argument `synthesizer` must have a 'vanilla' component to take "
            "the source's dot-product attention (e.g. 'vanilla' or "
            f"'random+vanilla'). Received: synthesizer={synthesizer!r}"
        )
    return variants


def convert_bert(source, synthesizer, synthesizer_options):
    blocks = source.transformer_layers
    epsilon = common_block_setting(blocks, "layer_norm_epsilon")
    check_block_setting(source, blocks, "normalize_first", False)
    if source.embeddings_layer_norm.epsilon != epsilon:
        raise ValueError(
            "Argument `backbone` cannot be converted: its embedding norm's "
            f"epsilon={source.embeddings_layer_norm.epsilon} differs from "
            f"its blocks' layer_norm_epsilon={epsilon}, which "
            "SynthesizerBackbone shares."
        )
    target = build_target(
        SynthesizerBackbone, source, synthesizer, synthesizer_options,
        **shared_sizes(source),
        num_segments=source.num_segments,
        pooling="cls_dense",
        activation=common_block_setting(blocks, "activation"),
        layer_norm_epsilon=epsilon,
    )
    copy_layer(target.embeddings.token_embedding, source.token_embedding)
    positions = ops.convert_to_numpy(
        source.position_embedding.position_embeddings)
    if target.segment_embedding is None:
        # One segment: its embedding is added to every token; it joins the
        # position embedding.
        positions = positions + ops.convert_to_numpy(
            source.segment_embedding.embeddings)[0]
    else:
        copy_layer(target.segment_embedding, source.segment_embedding)
    target.embeddings.position_embedding.set_weights([positions])
    copy_layer(target.embeddings_layer_norm, source.embeddings_layer_norm)
    copy_blocks(target, source)
    copy_layer(target.pooled_dense, source.pooled_dense)
    return target


def shared_sizes(source):
    """The sizes and dropout a keras-hub backbone and its target share."""
    names = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
             "intermediate_dim", "max_sequence_length", "dropout")
    return {name: getattr(source, name) for name in names}


def convert_gpt2(source, synthesizer, synthesizer_options):
    blocks = source.transformer_layers
    check_block_setting(source, blocks, "normalize_first", True)
    target = build_target(
        SynthesizerCausalLMBackbone, source, synthesizer, synthesizer_options,
        **shared_sizes(source),
        activation=common_block_setting(blocks, "activation"),
        normalize_first=True,
        layer_norm_epsilon=common_block_setting(
            blocks, "layer_norm_epsilon"),
    )
    if source.layer_norm.epsilon != target.layer_norm.epsilon:
        raise ValueError(
            "Argument `backbone` cannot be converted: its final norm's "
            f"epsilon={source.layer_norm.epsilon} differs from its blocks' "
            f"layer_norm_epsilon={target.layer_norm.epsilon}."
        )
    copy_layer(target.token_embedding, source.token_embedding)
    copy_layer(target.position_embedding, source.position_embedding)
    copy_blocks(target, source)
    copy_layer(target.layer_norm, source.layer_norm)
    return target


def build_target(cls, source, synthesizer, synthesizer_options, **config):
    try:
        return cls(synthesizer=synthesizer,
                   synthesizer_options=synthesizer_options,
                   dtype=source.dtype_policy, **config)
    except ValueError as error:
        raise ValueError(
            f"Cannot convert a {type(source).__name__} with "
            f"max_sequence_length={source.max_sequence_length} to a "
            f"{cls.__name__} with synthesizer={synthesizer!r}, "
            f"synthesizer_options={synthesizer_options!r}: {error}"
        ) from None


def common_block_setting(blocks, name):
    """The blocks' `name` attribute; ValueError if they differ."""
    values = [getattr(block, name) for block in blocks]
    if any(value != values[0] for value in values[1:]):
        raise ValueError(
            f"Argument `backbone` cannot be converted: its blocks differ in "
            f"`{name}` ({values!r}); the target's blocks share one."
        )
    return values[0]


def check_block_setting(source, blocks, name, expected):
    value = common_block_setting(blocks, name)
    if value != expected:
        raise ValueError(
            f"Argument `backbone` cannot be converted: the target's blocks "
            f"have {name}={expected}, the {type(source).__name__}'s have "
            f"{name}={value!r}."
        )


def copy_blocks(target, source):
    """Copies each source block into the target's and sets the target's
    non-vanilla synthesizers to zero logits."""
    for i, (mine, theirs) in enumerate(
            zip(target.transformer_layers, source.transformer_layers)):
        attention = mine.self_attention
        source_attention = theirs._self_attention_layer
        check_attention_layout(attention, source_attention, i)
        vanilla_index = [s.variant for s in attention.synthesizers].index(
            "vanilla")
        vanilla = attention.synthesizers[vanilla_index]
        for ours, other in (
            (vanilla.query_dense, source_attention.query_dense),
            (vanilla.key_dense, source_attention.key_dense),
            (attention.value_dense, source_attention.value_dense),
            (attention.output_dense, source_attention.output_dense),
        ):
            copy_layer(ours, other)
        for name in ("_self_attention_layer_norm", "_feedforward_layer_norm",
                     "_feedforward_intermediate_dense",
                     "_feedforward_output_dense"):
            copy_layer(getattr(mine, name), getattr(theirs, name))
        for j, component in enumerate(attention.synthesizers):
            if j == vanilla_index:
                continue
            try:
                component.zero_logits()
            except NotImplementedError as error:
                raise NotImplementedError(
                    "Cannot convert with synthesizer="
                    f"{attention.synthesizer!r}: {error}") from None
        weights = attention.mixture_weights()
        if weights is not None:
            # logits = w_vanilla * L_vanilla (the others are zero): the query
            # projection divided by w_vanilla gives the source's L_vanilla.
            inverse = 1.0 / ops.convert_to_numpy(weights)[:, vanilla_index]
            query = vanilla.query_dense
            query.kernel.assign(ops.convert_to_numpy(query.kernel)
                                * inverse[None, :, None])
            if query.bias is not None:
                query.bias.assign(ops.convert_to_numpy(query.bias)
                                  * inverse[:, None])


def check_attention_layout(attention, source_attention, index):
    """ValueError unless the source's heads are the target's."""
    layout = (source_attention.num_heads, source_attention.key_dim,
              source_attention.value_dim, source_attention.use_bias)
    expected = (attention.num_heads, attention.key_dim,
                attention.value_dim, attention.use_bias)
    if layout != expected:
        raise ValueError(
            "Argument `backbone` cannot be converted: the attention of its "
            f"block {index} has (num_heads, key_dim, value_dim, use_bias)="
            f"{layout}, the target's blocks {expected} (key and value heads "
            "of hidden_dim // num_heads, with biases)."
        )


def copy_layer(target, source):
    """Copies `source`'s weights into `target`, checking their shapes."""
    theirs = source.get_weights()
    ours = target.get_weights()
    shapes = [np.shape(w) for w in theirs]
    if shapes != [np.shape(w) for w in ours]:
        raise ValueError(
            f"Argument `backbone` cannot be converted: its layer "
            f"{source.name!r} has weights of shapes {shapes}, the target's "
            f"{target.name!r} {[np.shape(w) for w in ours]}."
        )
    target.set_weights(theirs)
