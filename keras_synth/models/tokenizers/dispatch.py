"""Where a character-level tokenizer's work runs: TensorFlow or Python.

`SynthesizerCharTokenizer` and `SynthesizerByteTokenizer` tokenize in
TensorFlow ops inside a `tf.data` pipeline or a traced function, or when
given TensorFlow tensors, and in plain Python otherwise (eager strings and
NumPy arrays on any backend). These two functions make that choice and
shape the Python results; shared by the tokenizers of this package, not
part of the public API.
"""

import keras
import numpy as np

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - tf is needed only in tf.data
    tf = None


def tokenize(inputs, tokenize_tf, tokenize_one, dtype):
    """`tokenize_tf(inputs)` in TensorFlow, else the ids of each text by
    `tokenize_one(text)`: an array of `dtype` for one text, a list of
    lists for a batch."""
    if tf is not None and (
        not tf.executing_eagerly() or isinstance(inputs, tf.Tensor)
    ):
        return tokenize_tf(inputs)
    if isinstance(inputs, (str, bytes)) or (
        isinstance(inputs, np.ndarray) and inputs.ndim == 0
    ):
        return np.array(tokenize_one(inputs), dtype)
    return [tokenize_one(text) for text in np.asarray(inputs)]


def detokenize(inputs, detokenize_tf, detokenize_one):
    """`detokenize_tf(inputs)` in TensorFlow, else the text of each row of
    ids by `detokenize_one(ids)`: a string for one row, a list for a
    batch (backend tensors and NumPy arrays are read as lists)."""
    if tf is not None and (
        not tf.executing_eagerly()
        or isinstance(inputs, (tf.Tensor, tf.RaggedTensor))
    ):
        return detokenize_tf(inputs)
    if keras.ops.is_tensor(inputs):
        inputs = keras.ops.convert_to_numpy(inputs)
    if isinstance(inputs, np.ndarray):
        inputs = inputs.tolist()
    inputs = list(inputs)
    if not inputs or not isinstance(inputs[0], (list, tuple, np.ndarray)):
        return detokenize_one(inputs)
    return [detokenize_one(ids) for ids in inputs]
