"""What the backbones share (not exported): their constructor arguments,
kept as attributes and returned by `get_config`."""


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
        return config
