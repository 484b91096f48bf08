"""Release 0.1's keyword arguments for synthesizer options, kept working.

Release 0.1 took each option as its own keyword argument at every level
(layer, blocks, backbones): `factorized_rank`, `factorized_dense_sizes`,
`random_initializer`. They now live in the variants that own them and are
passed as `synthesizer_options`. This module maps the old names onto the
new options, so that code written for 0.1 keeps working (with a
`DeprecationWarning`) and `.keras` files and presets saved by 0.1 (whose
configs carry the old keys) load unchanged (without a warning: the user
cannot edit a saved file).
"""

import warnings

# Old keyword argument -> (variants that own the option, option name).
LEGACY_ARGUMENTS = {
    "factorized_rank": (("factorized_random",), "rank"),
    "factorized_dense_sizes": (("factorized_dense",), "sizes"),
    "random_initializer": (
        ("random", "fixed_random", "factorized_random"), "initializer"),
}


def pop_legacy_options(kwargs, variants, synthesizer_options=None,
                       warn=True, owner="SynthesizerAttention"):
    """Removes release 0.1's option arguments from `kwargs` and returns
    `synthesizer_options` with them merged in.

    Args:
        kwargs: a dict of keyword arguments (modified in place).
        variants: the variant names in use; an old argument whose variants
            are not among them is dropped, as 0.1 ignored it.
        synthesizer_options: the new-style options, or `None`; an option
            given both ways is an error.
        warn: whether to emit a `DeprecationWarning` naming the new form.
        owner: the class named in the warning.
    """
    return merge_legacy_options(
        pop_legacy_arguments(kwargs), variants, synthesizer_options,
        warn=warn, owner=owner)


def pop_legacy_arguments(kwargs):
    """Removes release 0.1's option arguments from `kwargs` (in place) and
    returns them as a dict."""
    return {key: kwargs.pop(key) for key in list(kwargs)
            if key in LEGACY_ARGUMENTS}


def merge_legacy_options(found, variants, synthesizer_options=None,
                         warn=True, owner="SynthesizerAttention"):
    """`synthesizer_options` with the old arguments `found` merged in
    (arguments as `pop_legacy_options`')."""
    if not found:
        return synthesizer_options
    merged = dict(synthesizer_options or {})
    for key, value in found.items():
        owners, option = LEGACY_ARGUMENTS[key]
        if warn and value is not None:
            warnings.warn(
                f"`{owner}({key}=...)` is deprecated; pass "
                f"`synthesizer_options={{{option!r}: ...}}` instead "
                f"(the option of {', '.join(repr(o) for o in owners)}).",
                DeprecationWarning,
                stacklevel=4,
            )
        if value is None:
            continue
        for name in owners:
            if name not in variants:
                continue
            given = merged.get(name, {})
            if option in given or option in merged:
                raise ValueError(
                    f"Option {option!r} of {name!r} is given twice: as "
                    f"`{key}={value!r}` and in `synthesizer_options="
                    f"{synthesizer_options!r}`. Pass it in "
                    "`synthesizer_options` only."
                )
            merged[name] = dict(given, **{option: value})
    return merged
