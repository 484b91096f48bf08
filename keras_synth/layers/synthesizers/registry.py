"""The registry of synthesizers: names, registration, parsing mixtures,
and routing `synthesizer_options` to the variants that own them.

Built-in variants register themselves when `keras_synth.layers` is
imported; users add theirs with `register_synthesizer`, before building or
loading a model that names them (as with any Keras custom object).
"""

import difflib
import re

from keras_synth.layers.synthesizers.base import Synthesizer

_REGISTRY = {}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def register_synthesizer(name=None, override=False):
    """Registers a `Synthesizer` subclass under `name`, as a decorator.

    Afterwards `SynthesizerAttention(synthesizer=name)`, mixtures such as
    `f"{name}+vanilla"`, the blocks, backbones and `.keras`/preset loading
    accept the name. Its options are the keys of the class's `defaults`.

    Args:
        name: the variant name (a Python identifier, no `+`). Defaults to
            the class's `variant` attribute.
        override: whether to replace a registered variant of that name
            (else registering a taken name is an error).

    Example:

    >>> from keras import ops
    >>> from keras_synth.layers import Synthesizer, register_synthesizer
    >>> @register_synthesizer("uniform_doc", override=True)
    ... class Uniform(Synthesizer):
    ...     batch_dependent = False
    ...     def build(self, query_shape, key_shape):
    ...         pass
    ...     def logits(self, query, key, query_start, query_length,
    ...                key_length, scale=None):
    ...         return ops.zeros((self.num_heads, query_length, key_length))
    >>> "uniform_doc" in registered_synthesizers()
    True
    """
    def register(cls):
        variant = name if name is not None else cls.variant
        if not (isinstance(cls, type) and issubclass(cls, Synthesizer)):
            raise TypeError(
                "register_synthesizer registers subclasses of "
                "keras_synth.layers.Synthesizer. Received: "
                f"{cls!r}"
            )
        if not isinstance(variant, str) or not _NAME.match(variant):
            raise ValueError(
                "Received an invalid synthesizer name, expected a Python "
                "identifier (letters, digits, '_'; no '+', which joins "
                f"mixtures). Received: name={variant!r}"
            )
        if variant in _REGISTRY and not override and _REGISTRY[variant] is not cls:
            raise ValueError(
                f"A synthesizer named {variant!r} is already registered "
                f"({_REGISTRY[variant].__module__}."
                f"{_REGISTRY[variant].__qualname__}); pass override=True "
                "to replace it, or choose another name."
            )
        cls.variant = variant
        _REGISTRY[variant] = cls
        return cls

    return register


def registered_synthesizers():
    """The names of the registered synthesizers, built-in ones first."""
    return tuple(_REGISTRY)


def get_synthesizer(name):
    """The `Synthesizer` subclass registered as `name` (`ValueError` if
    none, with the registered names and the closest one)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
        raise ValueError(
            f"Unknown synthesizer {name!r}. Registered: "
            f"{registered_synthesizers()}"
            + (f". Did you mean {close[0]!r}?" if close else "")
            + ". A synthesizer defined outside keras-synth must be "
            "registered (keras_synth.layers.register_synthesizer) before "
            "a model naming it is built or loaded."
        ) from None


def parse_synthesizer(synthesizer):
    """Returns the canonical tuple of variant names of `synthesizer`.

    Accepts a name (`"random"`), a mixture written with `+`
    (`"random+vanilla"`) or a list/tuple of names. Raises `ValueError` for an
    unknown name, an empty mixture or a duplicate.
    """
    if isinstance(synthesizer, str):
        names = [name.strip() for name in synthesizer.split("+")]
    elif isinstance(synthesizer, (list, tuple)):
        names = list(synthesizer)
    else:
        raise ValueError(
            "Received an invalid value for argument `synthesizer`, expected a "
            "variant name, a mixture such as 'random+vanilla', or a list of "
            f"names. Received: synthesizer={synthesizer!r}"
        )
    if not names:
        raise ValueError(
            "Argument `synthesizer` names no variant. Expected one or more of "
            f"{registered_synthesizers()}. Received: "
            f"synthesizer={synthesizer!r}"
        )
    for name in names:
        if name not in _REGISTRY:
            close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
            raise ValueError(
                f"Unknown variant {name!r} in argument `synthesizer`. "
                f"Expected one of {registered_synthesizers()} or a mixture "
                f"of them joined with '+'. Received: "
                f"synthesizer={synthesizer!r}"
                + (f". Did you mean {close[0]!r}?" if close else "")
                + " (a user-defined synthesizer must be registered with "
                "keras_synth.layers.register_synthesizer first)"
            )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(
            f"Argument `synthesizer` names {duplicates} more than once; each "
            "variant may appear once in a mixture. "
            f"Received: synthesizer={synthesizer!r}"
        )
    return tuple(names)


def split_options(variants, synthesizer_options):
    """`synthesizer_options` as one mapping per variant of `variants`.

    Accepts `None`, a mapping of options (`{"rank": 4}`: each option goes
    to every component that has it, and one that no component has is an
    error), a mapping keyed by variant (`{"factorized_random": {"rank": 4}}`;
    entries of registered variants not in `variants` are ignored), or both
    mixed (a variant's own mapping wins). Values are not checked here
    (`Synthesizer.resolve_options` does).
    """
    if synthesizer_options is None:
        return {name: {} for name in variants}
    if not isinstance(synthesizer_options, dict):
        raise ValueError(
            "Received an invalid value for argument `synthesizer_options`, "
            "expected a dict of options (e.g. {'rank': 4}) or of options "
            "per variant (e.g. {'factorized_random': {'rank': 4}}). "
            f"Received: synthesizer_options={synthesizer_options!r}"
        )
    per_variant = {name: {} for name in variants}
    flat = {}
    for key, value in synthesizer_options.items():
        if key in per_variant:
            if not isinstance(value, dict):
                raise ValueError(
                    f"Options of variant {key!r} in argument "
                    "`synthesizer_options` must be a dict. Received: "
                    f"synthesizer_options={synthesizer_options!r}"
                )
            continue
        if key in _REGISTRY:
            # Options of a variant not in use: ignored, so that one mapping
            # serves a sweep over variants (and a decoder's two layers).
            continue
        flat[key] = value
    for key, value in flat.items():
        owners = [name for name in variants
                  if key in get_synthesizer(name).defaults]
        if not owners:
            options = {name: sorted(get_synthesizer(name).defaults)
                       for name in variants}
            close = difflib.get_close_matches(
                str(key), [o for opts in options.values() for o in opts], n=1)
            raise ValueError(
                f"Unknown option {key!r} in argument `synthesizer_options`: "
                f"no component of synthesizer={'+'.join(variants)!r} has it. "
                f"Options per variant: {options}. Received: "
                f"synthesizer_options={synthesizer_options!r}"
                + (f". Did you mean {close[0]!r}?" if close else "")
            )
        for name in owners:
            per_variant[name][key] = value
    for name in variants:
        per_variant[name].update(synthesizer_options.get(name, {}))
    return per_variant


def select_options(variants, synthesizer_options):
    """The part of `synthesizer_options` that concerns `variants`.

    A block or backbone holds one options mapping for several attention
    layers (a decoder's self- and cross-attention may use different
    variants): each layer gets the per-variant entries of its own variants
    and the flat options one of them has. Check the whole mapping against
    all the variants first (`split_options`).
    """
    if not synthesizer_options:
        return None
    selected = {}
    for key, value in synthesizer_options.items():
        if key in _REGISTRY:
            if key in variants:
                selected[key] = value
        elif any(key in get_synthesizer(name).defaults for name in variants):
            selected[key] = value
    return selected or None


def serialize_options(synthesizer_options):
    """`synthesizer_options` as JSON-friendly config, nested mappings kept."""
    if synthesizer_options is None:
        return None
    return {
        key: (serialize_options(value)
              if isinstance(value, dict) and "class_name" not in value
              else Synthesizer.serialize_option(value))
        for key, value in synthesizer_options.items()
    }


def deserialize_options(config):
    """The inverse of `serialize_options`."""
    if config is None:
        return None
    return {
        key: (deserialize_options(value)
              if isinstance(value, dict) and "class_name" not in value
              else Synthesizer.deserialize_option(value))
        for key, value in config.items()
    }


def variants_of(specs):
    """The set of variant names in the synthesizer specs `specs`, skipping
    specs that do not parse (their owner raises with its own context)."""
    variants = set()
    for spec in specs:
        try:
            variants.update(parse_synthesizer(spec))
        except ValueError:
            pass
    return variants
