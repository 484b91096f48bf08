"""`load_export`: loads a SavedModel written by the package's exports."""


def load_export(path):
    """Loads a SavedModel of `export_text_classifier` or `export_generator`.

    The exports tokenize inside the graph with TensorFlow Text ops
    (`RegexSplitWithOffsets`, `WordpieceTokenizeWithOffsets`, ...), which
    TensorFlow knows only once `tensorflow_text` is imported: this imports
    it, then calls `tf.saved_model.load(path)`. Needs no Keras backend in
    particular (TensorFlow runs the graph).

    Args:
        path: the SavedModel folder (a local path or a `gs://` URL).

    Returns:
        The loaded object: `.signatures["serving_default"]` of a classifier
        export, `.generate(...)` (or the given signature) of a generator.

    Raises:
        ImportError: `tensorflow_text` is not installed.

    Example:

    >>> import keras_synth
    >>> callable(keras_synth.models.load_export)
    True
    """
    try:
        import tensorflow_text  # noqa: F401  (registers the graph's ops)
    except ImportError as error:
        raise ImportError(
            "keras_synth.models.load_export needs tensorflow_text: the "
            "exported graph tokenizes with its ops. Install it with "
            "`pip install tensorflow-text` (the version matching "
            "TensorFlow's)."
        ) from error
    import tensorflow as tf

    return tf.saved_model.load(str(path))
