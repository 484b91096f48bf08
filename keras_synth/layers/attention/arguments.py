"""Checks of `SynthesizerAttention`'s constructor arguments.

Raises a `ValueError` naming the argument,
the value received and what was expected for anything else, including the
`MultiHeadAttention` arguments a synthesizer cannot honour.
"""

from keras_synth.layers.keras_utils import is_int


def check_positive_ints(**arguments):
    """Raises for any argument that is not a positive int.

    Each keyword maps an argument's name to `(value, optional)`; an optional
    argument may also be `None`.
    """
    for arg, (value, optional) in arguments.items():
        if optional and value is None:
            continue
        if not is_int(value) or value <= 0:
            raise ValueError(
                f"Received an invalid value for argument `{arg}`, "
                "expected a positive integer"
                + (" or `None`" if optional else "")
                + f". Received: {arg}={value!r}"
            )


def check_dropout(dropout):
    if not 0.0 <= dropout < 1.0:
        raise ValueError(
            "Received an invalid value for argument `dropout`, expected a "
            f"float in [0, 1). Received: dropout={dropout!r}"
        )


def check_max_length(synthesizers, max_length, synthesizer):
    """Raises if a component needs `max_length` and it is `None`."""
    needing = [s.variant for s in synthesizers if s.needs_max_length]
    if needing and max_length is None:
        raise ValueError(
            f"Argument `max_length` is required by the synthetic variant(s) "
            f"{needing}: the synthesized logits are max_length x "
            "max_length. Expected a positive integer. Received: "
            f"max_length=None with synthesizer={synthesizer!r}"
        )


def output_shape_tuple(output_shape):
    """`output_shape` as a tuple of positive ints, or `None`."""
    if output_shape is None:
        return None
    shape = (output_shape,) if is_int(output_shape) else output_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if not shape or not all(is_int(s) and s > 0 for s in shape):
        raise ValueError(
            "Received an invalid value for argument `output_shape`, "
            "expected a positive int or a non-empty tuple or list of them. "
            f"Received: output_shape={output_shape!r}"
        )
    return shape


def check_attention_axes(attention_axes):
    """`None` for the one axis a synthesizer attends over, else raises.

    The layer attends over the sequence axis of `(B, T, dim)` inputs; MHA's
    `attention_axes` selects other or several axes of higher-rank inputs,
    where a synthesizer has no `max_length x max_length` logits to offer.
    """
    axes = (attention_axes,) if is_int(attention_axes) else attention_axes
    if axes is None or tuple(axes) in ((1,), (-2,)):
        return None
    raise ValueError(
        "Received an invalid value for argument `attention_axes`: "
        "SynthesizerAttention attends over the sequence axis of (batch, "
        "length, features) inputs only. Expected None, 1 or -2. Received: "
        f"attention_axes={attention_axes!r}"
    )


def check_flash_attention(flash_attention, variants, dropout):
    """`None`, `False`, or `True` for a variant with a dot-product part
    (`vanilla`) and no dropout, as `MultiHeadAttention` allows it."""
    if flash_attention not in (None, True, False):
        raise ValueError(
            "Received an invalid value for argument `flash_attention`. "
            f"Expected None, True or False. Received: "
            f"flash_attention={flash_attention!r}"
        )
    if not flash_attention:
        return
    if "vanilla" not in variants:
        raise ValueError(
            "Received an invalid value for argument `flash_attention`: "
            f"synthesizer={'+'.join(variants)!r} has no dot-product part, so "
            "no flash attention kernel computes its logits. Expected None "
            "or False, or a variant with 'vanilla' (e.g. 'random+vanilla'). "
            f"Received: flash_attention={flash_attention!r}"
        )
    if dropout > 0.0:
        raise ValueError(
            "Dropout is not supported when flash attention is enabled. "
            "Expected dropout=0.0 with flash_attention=True. Received: "
            f"dropout={dropout}, flash_attention={flash_attention!r}"
        )


def check_sliding_window(sliding_window):
    if sliding_window is not None and (
        not is_int(sliding_window) or sliding_window <= 0
    ):
        raise ValueError(
            "Received an invalid value for argument `sliding_window`, "
            "expected `None` or a positive integer. Received: "
            f"sliding_window={sliding_window!r}"
        )


def check_input_shapes(query_shape, value_shape, key_shape):
    """Raises for ranks other than 3 and for axes that must agree, with
    `MultiHeadAttention`'s message for keys and values."""
    for arg, shape in (
        ("query", query_shape),
        ("value", value_shape),
        ("key", key_shape),
    ):
        if len(shape) != 3:
            raise ValueError(
                f"Argument `{arg}` must have rank 3 (batch, length, "
                f"features). Received: {arg}.shape={tuple(shape)}"
            )
    if tuple(value_shape[1:-1]) != tuple(key_shape[1:-1]):
        raise ValueError(
            "All dimensions of `value` and `key`, except the last one, "
            f"must be equal. Received: value_shape={tuple(value_shape)} "
            f"and key_shape={tuple(key_shape)}"
        )
    sizes = {query_shape[0], value_shape[0], key_shape[0]} - {None}
    if len(sizes) > 1:
        raise ValueError(
            "The batch dimensions of `query`, `value` and `key` must be "
            f"equal. Received: query_shape={tuple(query_shape)}, "
            f"value_shape={tuple(value_shape)} and "
            f"key_shape={tuple(key_shape)}"
        )
