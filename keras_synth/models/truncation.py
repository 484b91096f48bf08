"""Truncation reports of the preprocessors: nothing is cut silently.

The preprocessors take `truncation="warn"` (default), `"error"` or
`"allow"`. Their packers are wrapped in a `CheckedPacker`, which measures
each input (its tokens plus the special tokens the packer adds) before the
packer cuts it to `sequence_length`:

- `"warn"`: a `TruncationWarning` saying how many inputs were cut, their
  lengths and the packed length. Eagerly (a preprocessor called on
  strings, `generate()`) the warning comes on the spot; inside a
  `tf.data` pipeline or a `tf.function` (`fit()` and `predict()` on
  strings map the preprocessor over a `tf.data.Dataset`) the lengths are
  counted by a `tf.py_function`, which warns when the batch runs. A graph
  traced for a SavedModel (`export_generator`, `export_text_classifier`)
  cannot hold a `tf.py_function`: there `"warn"` counts nothing, and the
  exports report truncation in their outputs instead.
- `"error"`: a `ValueError` eagerly, a `tf.errors.InvalidArgumentError`
  (`tf.debugging.assert_less_equal`) in a graph, exports included.
- `"allow"`: the inputs are cut to `sequence_length` without a word.

Generation prompts are stricter: a prompt that fills the whole context
leaves no room to generate and is always an error (`check_room`).
"""

import warnings

import numpy as np

from keras_synth.layers.keras_utils import is_tracing_for_export

TRUNCATION_MODES = ("warn", "error", "allow")


class TruncationWarning(UserWarning):
    """Inputs longer than a preprocessor's `sequence_length` were cut.

    Raised as a warning by the preprocessors with `truncation="warn"` (the
    default). Pass `truncation="error"` to fail instead, `"allow"` to cut
    without a warning, or a longer `sequence_length`; or filter it:

    >>> import warnings
    >>> import keras_synth
    >>> issubclass(keras_synth.models.TruncationWarning, UserWarning)
    True
    """


def check_truncation_mode(truncation):
    """Returns `truncation` if it is a known mode, else raises."""
    if truncation not in TRUNCATION_MODES:
        raise ValueError(
            "Argument `truncation` must be one of "
            f"{', '.join(repr(m) for m in TRUNCATION_MODES)}. Received: "
            f"truncation={truncation!r}"
        )
    return truncation


def truncation_message(lengths, sequence_length, what, argument):
    """The message of a warning or error about cut inputs."""
    lengths = [int(n) for n in np.reshape(np.asarray(lengths), [-1])]
    cut = [n for n in lengths if n > sequence_length]
    shown = ", ".join(str(n) for n in cut[:10])
    if len(cut) > 10:
        shown += ", ..."
    return (
        f"{len(cut)} of {len(lengths)} {what} were longer than "
        f"`{argument}`={sequence_length} tokens (lengths with the special "
        f"tokens: {shown}) and were cut to {sequence_length}. Pass a larger "
        f"`{argument}`, `truncation=\"error\"` to fail instead, or "
        '`truncation="allow"` to cut them without this warning.'
    )


def report_truncation(lengths, sequence_length, truncation, what, argument):
    """Warns or raises, as `truncation` says, on lengths over the limit.

    Args:
        lengths: the inputs' lengths, special tokens included: NumPy-like,
            or a `tf.Tensor` (symbolic in a graph).
        sequence_length: int, the packed length.
        truncation: `"warn"`, `"error"` or `"allow"`.
        what: the inputs in words (`"inputs"`, `"sources"`).
        argument: the argument that sets the length.
    """
    if truncation == "allow":
        return
    import tensorflow as tf

    if tf.is_tensor(lengths) and tf.is_symbolic_tensor(lengths):
        if truncation == "error":
            tf.debugging.assert_less_equal(
                tf.cast(lengths, "int32"),
                tf.constant(int(sequence_length), "int32"),
                message=(
                    f"Some {what} are longer than `{argument}`="
                    f"{sequence_length} tokens (truncation=\"error\"); "
                    f"pass a larger `{argument}` or truncation=\"warn\"."
                ),
            )
            return
        if is_tracing_for_export():
            return

        def warn(values):
            report_truncation(
                values.numpy(), sequence_length, "warn", what, argument
            )
            return tf.constant(0, "int32")

        # Stateful: kept in `tf.function` and `tf.data` graphs unused.
        return tf.py_function(warn, [lengths], tf.int32)
    values = np.asarray(lengths)
    if not np.any(values > sequence_length):
        return
    message = truncation_message(values, sequence_length, what, argument)
    if truncation == "error":
        raise ValueError(message)
    warnings.warn(message, TruncationWarning, stacklevel=caller_stacklevel())


def caller_stacklevel():
    """The `stacklevel` of the first frame outside the libraries.

    The warning then points at the user's line (`preprocessor(x)`,
    `lm.generate(...)`), not at keras-hub's wrappers.
    """
    import sys

    inside = ("keras_synth", "keras_hub", "keras", "tensorflow", "tree",
              "optree")
    frame, level = sys._getframe(1), 1
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in inside:
            return level
        frame, level = frame.f_back, level + 1
    return 1


def check_room(lengths, sequence_length, what, argument):
    """Raises where a prompt leaves no room to generate.

    A prompt of `sequence_length` tokens or more (its start token included)
    fills the context: `generate()` would return it, cut, with nothing
    generated.
    """
    import tensorflow as tf

    message = (
        f"The {what} leaves no room to generate: the context is "
        f"{sequence_length} tokens ({argument}) and a prompt must have "
        "fewer, its start token included. Pass a shorter prompt or raise "
        f"{argument} (at most the backbone's max_sequence_length)."
    )
    if tf.is_tensor(lengths) and tf.is_symbolic_tensor(lengths):
        return tf.debugging.assert_less(
            tf.cast(lengths, "int32"),
            tf.constant(int(sequence_length), "int32"),
            message=message,
        )
    values = np.reshape(np.asarray(lengths), [-1])
    full = np.flatnonzero(values >= sequence_length)
    if full.size:
        raise ValueError(
            f"{message} Received: prompt length(s) "
            f"{values[full].tolist()} at index {full.tolist()}."
        )


def token_lengths(inputs):
    """Per-row token counts of a packer's input (ragged, dense or lists)."""
    import tensorflow as tf

    if isinstance(inputs, tf.RaggedTensor):
        if inputs.shape.rank == 1:
            return tf.reshape(tf.size(inputs, out_type="int32"), [1])
        return tf.cast(inputs.row_lengths(), "int32")
    if tf.is_tensor(inputs):
        if inputs.shape.rank == 1:
            return tf.reshape(tf.size(inputs, out_type="int32"), [1])
        shape = tf.shape(inputs, out_type="int32")
        return tf.fill([shape[0]], shape[1])
    if len(inputs) and isinstance(inputs[0], (list, tuple, np.ndarray)):
        return np.array([len(row) for row in inputs])
    return np.array([len(inputs)])


class CheckedPacker:
    """A keras-hub packer that reports what it cuts, as `truncation` says.

    Wraps a `StartEndPacker` (one input) or a `MultiSegmentPacker` (a tuple
    of segments: their lengths add up). Its `sequence_length` is the
    packer's.

    Args:
        packer: the keras-hub packer.
        truncation: `"warn"`, `"error"` or `"allow"`.
        what: the inputs in words.
        argument: the argument that sets the length.
        offset: subtracted from the packed length and the measured lengths
            in reports (the causal LM packs `sequence_length + 1` tokens).
        room: True for generation prompts: a prompt that fills the context
            is an error whatever `truncation` says.
    """

    def __init__(self, packer, truncation, what="inputs",
                 argument="sequence_length", offset=0, room=False):
        self.packer = packer
        self.truncation = truncation
        self.what = what
        self.argument = argument
        self.offset = offset
        self.room = room

    @property
    def sequence_length(self):
        return self.packer.sequence_length

    @sequence_length.setter
    def sequence_length(self, value):
        self.packer.sequence_length = value

    def lengths(self, inputs, add_start_value=True, add_end_value=True):
        from keras_synth._hub import keras_hub

        config = self.packer.get_config()
        if isinstance(self.packer, keras_hub.layers.MultiSegmentPacker):
            total = None
            for segment in inputs:
                n = token_lengths(segment)
                total = n if total is None else total + n
            return total + 1 + len(inputs)
        extra = int(add_start_value and config.get("start_value") is not None)
        extra += int(add_end_value and config.get("end_value") is not None)
        return token_lengths(inputs) + extra

    def __call__(self, inputs, sequence_length=None, **kwargs):
        limit = sequence_length or self.packer.sequence_length
        lengths = self.lengths(
            inputs,
            kwargs.get("add_start_value", True),
            kwargs.get("add_end_value", True),
        )
        if self.room:
            check_room(lengths, limit, self.what, self.argument)
        else:
            report_truncation(
                lengths - self.offset, limit - self.offset, self.truncation,
                self.what, self.argument,
            )
        return self.packer(inputs, sequence_length=sequence_length, **kwargs)


def check_packer(layer, name, **kwargs):
    """Replaces `layer.<name>` (a keras-hub packer) by a `CheckedPacker`.

    The packer is removed first: on the PyTorch backend a layer is a
    `torch.nn.Module`, whose child modules cannot be replaced by another
    kind of object.
    """
    packer = getattr(layer, name)
    if isinstance(packer, CheckedPacker):
        return
    delattr(layer, name)
    setattr(layer, name, CheckedPacker(packer, **kwargs))
