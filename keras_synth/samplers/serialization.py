"""`get`: a sampler from a name, a config or an instance."""

from keras_synth._hub import keras_hub
from keras_synth.samplers.length_penalty_beam_sampler import (
    LengthPenaltyBeamSampler,
)

_OWN = {"length_penalty_beam": LengthPenaltyBeamSampler}


def get(identifier):
    """Returns a sampler for `identifier`.

    Args:
        identifier: a keras-hub sampler name (`"greedy"`, `"top_k"`,
            `"top_p"`, `"beam"`, `"random"`, `"contrastive"`), or
            `"length_penalty_beam"` (`LengthPenaltyBeamSampler` with its
            defaults), a sampler config dict, a sampler instance or `None`.

    Returns:
        A `keras_hub.samplers.Sampler` instance (or `None`).

    Example:

    >>> type(get("greedy")).__name__
    'GreedySampler'
    >>> get("length_penalty_beam").num_beams
    4
    """
    if isinstance(identifier, str) and identifier in _OWN:
        return _OWN[identifier]()
    if isinstance(identifier, dict) and identifier.get("class_name") in (
        "LengthPenaltyBeamSampler",
        "keras_synth>LengthPenaltyBeamSampler",
    ):
        return LengthPenaltyBeamSampler(**identifier.get("config", {}))
    error = None
    try:
        sampler = keras_hub.samplers.get(identifier)
    except (KeyError, ValueError, TypeError) as caught:
        sampler, error = None, caught
    # keras-hub returns an unknown name as it is (a str is callable).
    if identifier is not None and (sampler is None or isinstance(sampler, str)):
        raise ValueError(
            "Argument `sampler` must be a sampler instance or one of the names "
            "'greedy', 'top_k', 'top_p', 'beam', 'random', 'contrastive', "
            f"'length_penalty_beam'. Received: sampler={identifier!r}"
            + (f" ({error})" if error else "")
        ) from None
    return sampler
