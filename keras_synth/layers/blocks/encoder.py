"""`SynthesizerEncoder`: keras-nlp's `TransformerEncoder` with synthesized attention."""

import keras

from keras_synth._hub import keras_hub
from keras_synth.layers.blocks import base as utils
from keras_synth.layers.keras_utils import with_quantized_dtype
from keras_synth.layers.synthesizers import parse_synthesizer
from keras_synth.layers.synthesizers.legacy import pop_legacy_arguments


@keras.saving.register_keras_serializable(package="keras_synth")
class SynthesizerEncoder(
    utils.SynthesizerBlockMixin, keras_hub.layers.TransformerEncoder
):
    """Transformer encoder block whose self-attention is a Synthesizer.

    A drop-in for `keras_hub.layers.TransformerEncoder` (and an instance of
    it): same constructor arguments, same call signature, same sublayers
    and weight names, except that the self-attention is a
    `keras_synth.layers.SynthesizerAttention` with `key_dim = hidden_dim //
    num_heads`. Switching a keras-nlp model to a Synthesizer is one line:

    ```python
    # keras_hub.layers.TransformerEncoder(intermediate_dim=256, num_heads=4)
    SynthesizerEncoder(intermediate_dim=256, num_heads=4,
                       synthesizer="random", max_length=128)
    ```

    The block owns exactly the weights it uses: the attention is built in
    `build` in place of keras-nlp's `MultiHeadAttention`, never next to it.
    Its parameter count is keras-nlp's count minus the query and key
    projections, plus the synthesizer's logit path (none of that changes for
    `synthesizer="vanilla"`, which is keras-nlp's block).

    Args:
        intermediate_dim: int, the hidden size of the feedforward network.
        num_heads: int, the number of attention heads.
        dropout: float, dropout of the attention probabilities, of the
            attention output and of the feedforward network. Defaults to 0.
        activation: the activation of the feedforward network. Defaults to
            `"relu"`.
        layer_norm_epsilon: float, epsilon of the layer normalizations.
            Defaults to `1e-5`.
        kernel_initializer: initializer of the kernels (attention and
            feedforward). Defaults to `"glorot_uniform"`.
        bias_initializer: initializer of the biases. Defaults to `"zeros"`.
        normalize_first: bool. If True, normalize the inputs of the attention
            and the feedforward network (pre-LN, like GPT-2); if False, their
            outputs (post-LN, like BERT). Defaults to False.
        synthesizer: the variant of `SynthesizerAttention`: `"dense"`,
            `"random"`, `"fixed_random"`, `"factorized_dense"`,
            `"factorized_random"`, `"vanilla"` or a mixture such as
            `"random+vanilla"`. Defaults to `"dense"`.
        max_length: int, the longest sequence `ℓ` (required by every variant
            but pure `"vanilla"`).
        synthesizer_options: dict of the variants' options, as
            `SynthesizerAttention`'s (e.g. `{"rank": 4}`), for every
            attention layer of the block. (Release 0.1's one argument per
            option still works, deprecated.)
        feedforward_chunk_size: int or `None` (default): run the
            feedforward sublayer, with the residual step before it, over
            chunks of this many tokens (batch x length), each
            rematerialised in the backward pass, so that its intermediate
            activations exist for one chunk at a time. The same outputs
            and gradients, less memory at long lengths (for
            `factorized_random`, twice the trainable length in the same
            memory), a little more compute.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`, ...).

    Call arguments:
        inputs: `(batch_size, sequence_length, hidden_dim)` tensor.
        padding_mask: optional boolean `(batch_size, sequence_length)` mask,
            True for real tokens; when `None`, the Keras mask of `inputs` is
            used.
        attention_mask: optional boolean `(batch_size, sequence_length,
            sequence_length)` mask, True where attention is allowed.
        training: whether dropout is active.
        return_attention_scores: whether to also return the attention
            probabilities `(batch_size, num_heads, sequence_length,
            sequence_length)`.

    Returns:
        A tensor shaped like `inputs`, or `(outputs, attention_scores)` with
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> encoder = SynthesizerEncoder(
    ...     intermediate_dim=64, num_heads=4, synthesizer="random+vanilla",
    ...     max_length=16)
    >>> x = np.random.rand(2, 10, 32).astype("float32")
    >>> tuple(encoder(x, padding_mask=np.arange(10)[None] < [[10], [6]]).shape)
    (2, 10, 32)
    """

    def __init__(
        self,
        intermediate_dim,
        num_heads,
        dropout=0,
        activation="relu",
        layer_norm_epsilon=1e-05,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        normalize_first=False,
        synthesizer="dense",
        max_length=None,
        synthesizer_options=None,
        feedforward_chunk_size=None,
        **kwargs,
    ):
        legacy = pop_legacy_arguments(kwargs)
        super().__init__(
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            normalize_first=normalize_first,
            **kwargs,
        )
        self._set_synthesizer_arguments(
            [synthesizer], max_length, synthesizer_options, legacy)
        self._set_feedforward_chunk_size(feedforward_chunk_size)
        self.synthesizer = synthesizer
        utils.check_synthesizer_arguments(
            num_heads, self._synthesizer_kwargs(synthesizer)
        )
        self.synthesizer = "+".join(parse_synthesizer(synthesizer))

    def build(self, inputs_shape):
        # keras-nlp's build, with the attention replaced *before* any weight
        # exists (no `super().build()`: it would create an unused MHA).
        key_dim = self._head_dim(inputs_shape[-1], "key_dim")
        self._self_attention_layer = self._attention(
            "self_attention_layer", self.synthesizer, key_dim
        )
        self._self_attention_layer.build(inputs_shape, inputs_shape)
        self._self_attention_layer_norm = self._layer_norm(
            "self_attention_layer_norm", inputs_shape
        )
        self._self_attention_dropout = self._dropout("self_attention_dropout")
        self._feedforward_layer_norm = self._layer_norm(
            "feedforward_layer_norm", inputs_shape
        )
        self._build_feedforward_denses(inputs_shape)
        self._feedforward_dropout = self._dropout("feedforward_dropout")
        self.built = True

    @property
    def self_attention(self):
        """The block's `SynthesizerAttention` (after `build`)."""
        return getattr(self, "_self_attention_layer", None)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        length = keras.ops.shape(inputs)[1]
        masks = utils.attention_mask_arguments(
            inputs, padding_mask, attention_mask, length, length
        )
        x, attention_scores = self._attention_sublayer(
            inputs,
            self._self_attention_layer,
            self._self_attention_layer_norm,
            self._self_attention_dropout,
            inputs,
            training,
            returns_pair=return_attention_scores,
            feedforward=True,
            return_attention_scores=return_attention_scores,
            **masks,
        )
        if return_attention_scores:
            return x, attention_scores
        return x

    def get_config(self):
        config = super().get_config()
        config["synthesizer"] = self.synthesizer
        config.update(self._synthesizer_config())
        return with_quantized_dtype(self, config)
