"""`ShuffledFitMixin`: `fit(shuffle=True)` on in-memory data shuffles."""


class ShuffledFitMixin:
    """`fit()` on lists or arrays (raw strings) shuffles them each epoch.

    keras-hub's tasks batch in-memory inputs into a dataset in their given
    order and pass `shuffle` on to Keras, which ignores it for datasets and
    warns ("`shuffle=True` was passed, but will be ignored"): the data was
    never shuffled. Here, with `shuffle=True` (Keras' default) and no
    `validation_split`, in-memory inputs become a `tf.data.Dataset`
    shuffled anew each epoch (`reshuffle_each_iteration`) and batched by
    `batch_size` (default 32), which the task preprocesses as any dataset.
    A dataset passed in is used as it is (shuffle it yourself).
    """

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None,
            shuffle=True, validation_split=None, **kwargs):
        import tensorflow as tf

        import keras

        if shuffle and not validation_split and x is not None and not (
            isinstance(x, tf.data.Dataset) or hasattr(x, "__next__")
            or isinstance(x, keras.utils.PyDataset)
        ):
            data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
            ds = tf.data.Dataset.from_tensor_slices(data)
            size = int(ds.cardinality())
            x = ds.shuffle(max(size, 1), reshuffle_each_iteration=True).batch(
                batch_size or 32)
            y = sample_weight = batch_size = None
        return super().fit(
            x=x, y=y, batch_size=batch_size, sample_weight=sample_weight,
            shuffle=False, validation_split=validation_split, **kwargs)
