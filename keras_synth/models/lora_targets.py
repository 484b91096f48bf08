"""The layers that `enable_lora` targets by default in the backbones."""

from keras_synth.layers.synthesizers import get_synthesizer
from keras_synth.layers.synthesizers import variants_of

# Every attention layer's value and output projections (`SynthesizerAttention`
# and `keras.layers.MultiHeadAttention` name them alike).
PROJECTIONS = ("value", "attention_output")


def lora_layer_names(specs):
    """The default LoRA targets of a model whose attention layers use the
    synthesizer `specs` (strings or lists of variant names): the value and
    output projections, then each variant's own (`Synthesizer.
    lora_layer_names`: vanilla's query and key, the dense synthesizer and
    its hidden projection, factorized dense's hidden projection, the random
    and factorized random synthesizers)."""
    names = list(PROJECTIONS)
    for variant in sorted(variants_of(specs)):
        for name in get_synthesizer(variant).lora_layer_names():
            if name not in names:
                names.append(name)
    return names


class LoraTargetsMixin:
    """`default_lora_layer_names` from the backbone's synthesizers.

    Mixed in before `keras_hub.models.Backbone`, whose `enable_lora(rank)`
    freezes every layer and enables LoRA on the layers of these names.
    """

    def default_lora_layer_names(self):
        """Returns the names of the layers `enable_lora` targets by default."""
        specs = [getattr(self, name) for name in
                 ("synthesizer", "cross_attention_synthesizer")
                 if getattr(self, name, None) is not None]
        return lora_layer_names(specs)

    def get_lora_target_names(self):
        """`default_lora_layer_names`, under the name keras-hub releases
        before 0.21 read it by (their `enable_lora` calls this one)."""
        return self.default_lora_layer_names()
