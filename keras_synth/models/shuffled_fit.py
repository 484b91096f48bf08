"""`ShuffledFitMixin`: `fit()` on in-memory data shuffles it, and keeps one
data iterator for the whole `fit`."""


def in_memory_dataset(data, batch_size=None, shuffle=True,
                      steps_per_epoch=None):
    """In-memory `data` as the batched `tf.data.Dataset` a task's `fit`
    reads, and the `steps_per_epoch` to pass with it.

    Shuffled anew each epoch with `shuffle=True` (in the given order
    otherwise), batched by `batch_size` (default 32, the last batch
    partial). Without `steps_per_epoch` the dataset repeats and
    `steps_per_epoch` is its number of batches: each epoch still reads
    every example once, but Keras keeps one iterator for the whole `fit`
    instead of making two per epoch. Making an iterator instantiates the
    preprocessing graph mapped over the batches (the tokenizer's): 0.4-0.7 s
    on a CPU, most of a small `fit`'s time after its first epoch.

    Args:
        data: what `keras.utils.pack_x_y_sample_weight` returns.
        batch_size: int or None (32).
        shuffle: bool, shuffle each epoch.
        steps_per_epoch: int or None; given, the dataset does not repeat.

    Returns:
        `(dataset, steps_per_epoch)`.

    Example:

    >>> from keras_synth.models.shuffled_fit import in_memory_dataset
    >>> ds, steps = in_memory_dataset((["a", "b", "c"], [0, 1, 0]),
    ...                               batch_size=2, shuffle=False)
    >>> steps, [len(x) for x, y in ds.take(3)]
    (2, [2, 1, 2])
    """
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(data)
    size = int(ds.cardinality())
    batch_size = batch_size or 32
    if shuffle:
        ds = ds.shuffle(max(size, 1), reshuffle_each_iteration=True)
    ds = ds.batch(batch_size)
    if steps_per_epoch is None and size > 0:
        ds = ds.repeat()
        steps_per_epoch = -(-size // batch_size)
    return ds, steps_per_epoch


def is_in_memory(data):
    """Whether `data` (a structure of lists, tuples and dicts) holds only
    strings, numbers, arrays and tensors (and `None`s): what
    `in_memory_dataset` takes. Datasets, generators and loaders
    (`tf.data`, grain, PyDataset) are not."""
    import numpy as np

    import keras

    leaves = [leaf for leaf in keras.tree.flatten(data)
              if leaf is not None]
    return bool(leaves) and all(
        isinstance(leaf, (str, bytes, int, float, np.ndarray, np.generic))
        or (hasattr(leaf, "shape") and hasattr(leaf, "dtype"))
        for leaf in leaves)


class ShuffledFitMixin:
    """`fit()` on lists or arrays (raw strings) shuffles them each epoch.

    keras-hub's tasks batch in-memory inputs into a dataset in their given
    order and pass `shuffle` on to Keras, which ignores it for datasets and
    warns ("`shuffle=True` was passed, but will be ignored"): the data was
    never shuffled. Here, without `validation_split`, in-memory inputs
    become a `tf.data.Dataset` (`in_memory_dataset`), shuffled anew each
    epoch with `shuffle=True` (Keras' default) and batched by `batch_size`
    (default 32), which the task preprocesses as any dataset; it repeats
    for the whole `fit` (one iterator, not two per epoch) unless
    `steps_per_epoch` is given. A dataset passed in is used as it is
    (shuffle it yourself).
    """

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None,
            shuffle=True, validation_split=None, steps_per_epoch=None,
            **kwargs):
        import keras

        data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        if not validation_split and x is not None and is_in_memory(data):
            x, steps_per_epoch = in_memory_dataset(
                data, batch_size, shuffle, steps_per_epoch)
            y = sample_weight = batch_size = None
        return super().fit(
            x=x, y=y, batch_size=batch_size, sample_weight=sample_weight,
            shuffle=False, validation_split=validation_split,
            steps_per_epoch=steps_per_epoch, **kwargs)
