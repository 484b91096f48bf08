"""The training loop's parts: learning-rate schedule, moving average of
the weights, gradient clipping after the all-reduce, the recipes' AdamW,
resumable epoch streams (the callbacks are in `recipes.core.callbacks`
and `recipes.core.timing`)."""

import contextlib


def learning_rate_schedule(peak, total_steps, warmup_fraction=0.1):
    """Linear warmup to `peak`, then cosine decay to 0 over `total_steps`."""
    import keras

    warmup = int(total_steps * warmup_fraction)
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else peak,
        decay_steps=max(1, total_steps - warmup),
        warmup_target=peak if warmup else None,
        warmup_steps=warmup,
    )


def ema_options(ema_momentum):
    """Optimizer keyword arguments for `--ema_momentum` (None: no EMA)."""
    if ema_momentum is None:
        return {}
    return {"use_ema": True, "ema_momentum": ema_momentum}


def clipped_after_all_reduce(optimizer_class, global_clipnorm, **kwargs):
    """An optimizer of `optimizer_class` (e.g. `keras.optimizers.AdamW`)
    that clips the gradients to the global norm `global_clipnorm` once they
    are summed over the replicas, so that a run trains the same on any
    number of devices.

    Keras 3's own `clipnorm` and `global_clipnorm` clip in
    `BaseOptimizer._backend_apply_gradients`, before the TensorFlow
    backend's `_backend_update_step` sums the gradients over the replicas
    (`_all_reduce_sum_gradients`): under a `tf.distribute` strategy each
    replica clips its own part of the gradient, and N replicas step up to N
    times as far as one device. Here the optimizer has no Keras clipping;
    the sum over the replicas (the gradient of the global batch) is clipped
    by its global norm, on every replica alike.

    On JAX and PyTorch there is no per-replica gradient to sum (one
    device, or `keras.distribution`, whose compiled step computes the
    global batch's gradient): there the optimizer is `optimizer_class`
    with Keras' own `global_clipnorm`.

    Args:
        optimizer_class: a Keras optimizer class.
        global_clipnorm: positive finite float, the largest global norm of
            the summed gradient.
        **kwargs: the optimizer's arguments (no `clipnorm`,
            `global_clipnorm` or `clipvalue`).

    Returns:
        The optimizer (an instance of a subclass of `optimizer_class` on
        TensorFlow, of `optimizer_class` on JAX and PyTorch).
    """
    if (isinstance(global_clipnorm, bool)
            or not isinstance(global_clipnorm, (int, float))
            or not 0 < global_clipnorm < float("inf")):
        raise ValueError(
            "Argument `global_clipnorm` must be a positive finite number. "
            f"Received: global_clipnorm={global_clipnorm!r}")
    clipping = sorted({"clipnorm", "global_clipnorm", "clipvalue"}
                      & set(kwargs))
    if clipping:
        raise ValueError(
            f"Arguments {clipping} would clip before the all-reduce; "
            "`clipped_after_all_reduce` clips after it (`global_clipnorm`). "
            f"Received: {', '.join(f'{k}={kwargs[k]!r}' for k in clipping)}")
    if not hasattr(optimizer_class, "_all_reduce_sum_gradients"):
        # JAX and PyTorch: the gradient is already the global batch's (one
        # device, or a `keras.distribution` whose compiled step sums over
        # the batch axis), so Keras' own clipping clips the summed one.
        return optimizer_class(global_clipnorm=global_clipnorm, **kwargs)

    class ClippedAfterAllReduce(optimizer_class):
        def __init__(self, *args, clipped_global_norm, **kwargs):
            super().__init__(*args, **kwargs)
            self.clipped_global_norm = float(clipped_global_norm)

        def _all_reduce_sum_gradients(self, grads_and_vars):
            import tensorflow as tf

            pairs = list(super()._all_reduce_sum_gradients(grads_and_vars))
            # An embedding's gradient (IndexedSlices) repeats the rows of
            # tokens seen twice (and, summed over replicas, of each
            # replica): summed per row first, its norm is the dense one's.
            grads, _ = tf.clip_by_global_norm(  # None gradients stay None
                [_unique_rows(g) for g, _ in pairs],
                self.clipped_global_norm)
            return [(g, v) for g, (_, v) in zip(grads, pairs)]

        def get_config(self):
            config = super().get_config()
            config["clipped_global_norm"] = self.clipped_global_norm
            return config

    ClippedAfterAllReduce.__name__ = (
        f"{optimizer_class.__name__}ClippedAfterAllReduce")
    return ClippedAfterAllReduce(clipped_global_norm=global_clipnorm,
                                 **kwargs)


# The variables AdamW leaves out of its weight decay (matched in their
# names): biases and the layer normalizations' scale and offset.
NO_WEIGHT_DECAY = ("bias", "gamma", "beta")


def adamw(learning_rate, weight_decay, ema_momentum=None, global_clipnorm=1.0,
          **kwargs):
    """The GLUE and LM recipes' optimizer: `keras.optimizers.AdamW` with
    `weight_decay` on every variable but biases and layer-normalization
    scales and offsets (`NO_WEIGHT_DECAY`), the summed gradient clipped to
    `global_clipnorm` after the all-reduce (`clipped_after_all_reduce`),
    and a moving average of the weights with `ema_momentum`
    (`ema_options`).

    Args:
        learning_rate: a float or a schedule.
        weight_decay: float, AdamW's decoupled weight decay.
        ema_momentum: float in (0, 1), or None for no moving average.
        global_clipnorm: the largest global norm of the summed gradient.
        **kwargs: more AdamW arguments (`beta_1`, `beta_2`, ...).
    """
    import keras

    optimizer = clipped_after_all_reduce(
        keras.optimizers.AdamW, global_clipnorm, learning_rate=learning_rate,
        weight_decay=weight_decay, **ema_options(ema_momentum), **kwargs)
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
    return optimizer


def _unique_rows(gradient):
    """`gradient` with the rows of an `IndexedSlices` summed per index."""
    import tensorflow as tf

    if not isinstance(gradient, tf.IndexedSlices):
        return gradient
    indices, positions = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, positions,
                                          tf.shape(indices)[0])
    return tf.IndexedSlices(values, indices, gradient.dense_shape)


def finalize_weights(model):
    """Gives a restored, already finished run the weights `fit` ends with:
    the moving average under `--ema_momentum` (a no-op without it).

    `Model.fit` swaps the average in when it ends, but a run restarted
    after its last checkpoint skips `fit`, and checkpoints hold the raw
    weights (the average lives in the optimizer's state).
    """
    if model.optimizer is not None:
        model.optimizer.finalize_variable_values(model.trainable_variables)


def count_params(model):
    return int(sum(int(v.numpy().size) if hasattr(v, "numpy")
                   else int(v.size) for v in model.trainable_weights))


def shuffled_epochs(dataset, buffer_size, batch_size, seed, epochs,
                    initial_epoch=0, drop_remainder=True):
    """Batches of `dataset` for epochs `initial_epoch .. epochs - 1`, one
    stream, each epoch shuffled with a seed derived from `(seed, epoch)`.

    A run resumed after epoch `k` thus sees exactly the batches an
    uninterrupted run sees in epochs `k + 1, ...` (with
    `reshuffle_each_iteration`, the order would instead depend on how many
    epochs this process has run). Pass `steps_per_epoch` (the number of
    batches per epoch) to `Model.fit`: the stream has no known length.
    """
    if not 0 <= initial_epoch <= epochs:
        raise ValueError(
            f"Expected 0 <= initial_epoch <= epochs. Received: "
            f"initial_epoch={initial_epoch}, epochs={epochs}")
    # All epochs done (killed before the results were written): no batches.
    stream = dataset.take(0).batch(batch_size, drop_remainder=drop_remainder)
    if initial_epoch < epochs:
        stream = None
    for epoch in range(initial_epoch, epochs):
        batches = dataset.shuffle(
            buffer_size, seed=(seed * 1000003 + epoch) % (2**31 - 1),
            reshuffle_each_iteration=False,
        ).batch(batch_size, drop_remainder=drop_remainder)
        stream = batches if stream is None else stream.concatenate(batches)
    return stream


@contextlib.contextmanager
def without_preprocessor(model):
    """Detaches a keras-hub task's `preprocessor` (e.g. for `fit` on token
    ids the recipe packed itself), and puts it back."""
    preprocessor = model.preprocessor
    model.preprocessor = None
    try:
        yield model
    finally:
        model.preprocessor = preprocessor
