"""What the backbones share (not exported): their constructor arguments,
kept as attributes and returned by `get_config`, and the synthesizer
options in their config."""

from keras_synth.layers.synthesizers import deserialize_options
from keras_synth.layers.synthesizers import serialize_options
from keras_synth.layers.synthesizers import variants_of
from keras_synth.layers.synthesizers.legacy import pop_legacy_options


class ConfigAttributesMixin:
    """Constructor arguments as attributes, and `get_config` from them.

    Mixed in before `keras_hub.models.Backbone`: `_set_config(**arguments)`
    (after the functional model is built) keeps every argument as an
    attribute of its name; `get_config` adds them, in that order, to the
    base config.
    """

    def _set_config(self, **arguments):
        for name, value in arguments.items():
            setattr(self, name, value)
        self._config_names = tuple(arguments)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self._config_names})
        if "synthesizer_options" in config:
            config["synthesizer_options"] = serialize_options(
                config["synthesizer_options"])
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        specs = [config.get(key) for key in
                 ("synthesizer", "cross_attention_synthesizer") if key in config]
        # Release 0.1's configs carry its option keys: no warning for them.
        config["synthesizer_options"] = pop_legacy_options(
            config, variants_of(specs),
            deserialize_options(config.get("synthesizer_options")),
            warn=False, owner=cls.__name__)
        return super().from_config(config)


def synthesizer_options_argument(kwargs, specs, synthesizer_options, owner):
    """A backbone's `synthesizer_options` with release 0.1's option
    arguments popped from `kwargs` and merged in (deprecated)."""
    return pop_legacy_options(kwargs, variants_of(specs), synthesizer_options,
                              owner=owner)


def check_backbone_sizes(**sizes):
    """ValueError naming the first size that is not a positive int, or a
    `hidden_dim` that `num_heads` does not divide (keyword arguments: the
    backbone's argument names and values)."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or (
            value < 1
        ):
            raise ValueError(
                f"Argument `{name}` must be a positive int. Received: "
                f"{name}={value!r}"
            )
    if sizes["hidden_dim"] % sizes["num_heads"]:
        raise ValueError(
            f"Argument `hidden_dim`={sizes['hidden_dim']} must be divisible "
            f"by `num_heads`={sizes['num_heads']}."
        )
