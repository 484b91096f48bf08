"""recipes.core.training."""

import pytest

from recipes.core import callbacks
from recipes.core import timing
from recipes.core import training
from tests.recipes.core.tensorflow_only import requires_tensorflow


@requires_tensorflow
def test_learning_rate_schedule():
    schedule = training.learning_rate_schedule(1e-3, total_steps=100,
                                             warmup_fraction=0.1)
    values = [float(schedule(step)) for step in (0, 5, 10, 55, 100)]
    assert values[0] == pytest.approx(0.0)
    assert values[1] == pytest.approx(5e-4, rel=1e-3)
    assert values[2] == pytest.approx(1e-3, rel=1e-3)
    assert values[2] > values[3] > values[4]
    assert values[4] == pytest.approx(0.0, abs=1e-9)


@requires_tensorflow
def test_clipped_after_all_reduce_clips_the_dense_global_norm():
    import keras
    import numpy as np
    import tensorflow as tf

    # Token 1 three times: its embedding gradient is IndexedSlices with a
    # repeated row, whose dense norm (3 x a row) is not the norm of the
    # slices' values (sqrt(3) x a row).
    embedding = keras.layers.Embedding(5, 3)
    dense = keras.layers.Dense(1, use_bias=False)
    ids = tf.constant([[1, 1, 1, 2]])
    dense(embedding(ids))
    variables = embedding.trainable_variables + dense.trainable_variables
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(dense(embedding(ids))) * 10.0
    grads = tape.gradient(loss, [v.value for v in variables])
    assert isinstance(grads[0], tf.IndexedSlices)
    dense_grads = [tf.convert_to_tensor(g).numpy() for g in grads]
    gradient_norm = np.sqrt(sum(np.sum(g ** 2) for g in dense_grads))
    clip = float(gradient_norm) / 3
    optimizer = training.clipped_after_all_reduce(
        keras.optimizers.SGD, clip, learning_rate=1.0)
    before = [v.numpy().copy() for v in variables]
    optimizer.apply(grads, variables)
    steps = [b - v.numpy() for b, v in zip(before, variables)]
    # The step is the gradient scaled to the clip (direction kept).
    for step, gradient in zip(steps, dense_grads):
        np.testing.assert_allclose(step, gradient * clip / gradient_norm,
                                   rtol=1e-5, atol=1e-7)
    assert optimizer.get_config()["clipped_global_norm"] == clip
    assert optimizer.get_config()["global_clipnorm"] is None
    assert isinstance(optimizer, keras.optimizers.SGD)


@requires_tensorflow
def test_clipped_after_all_reduce_refuses_bad_arguments():
    import keras

    for bad in (0, -1.0, float("inf"), float("nan"), None, True, "1"):
        with pytest.raises(ValueError, match=r"`global_clipnorm` must be a "
                           r"positive finite number\. Received: "
                           r"global_clipnorm="):
            training.clipped_after_all_reduce(keras.optimizers.SGD, bad)
    with pytest.raises(ValueError, match=r"\['clipnorm'\] would clip before "
                       r"the all-reduce.*clipnorm=1\.0"):
        training.clipped_after_all_reduce(keras.optimizers.SGD, 1.0,
                                          clipnorm=1.0)


@requires_tensorflow
def test_adamw_decays_weights_but_not_biases_and_norms():
    import keras
    import numpy as np

    dense = keras.layers.Dense(2)
    norm = keras.layers.LayerNormalization()
    norm(dense(np.ones((1, 3), "float32")))
    variables = dense.trainable_variables + norm.trainable_variables
    for variable in variables:
        variable.assign(np.full(variable.shape, 2.0, "float32"))
    optimizer = training.adamw(0.1, 0.5, ema_momentum=0.9, beta_2=0.98)
    # A zero gradient: only the decoupled weight decay moves a variable,
    # by learning_rate x weight_decay x value (here 0.1 x 0.5 x 2).
    optimizer.apply([keras.ops.zeros_like(v) for v in variables], variables)
    moved = {v.path.split("/")[-1]: float(np.max(np.abs(
        keras.ops.convert_to_numpy(v) - 2.0))) for v in variables}
    assert moved == pytest.approx({"kernel": 0.1, "bias": 0.0,
                                   "gamma": 0.0, "beta": 0.0})
    config = optimizer.get_config()
    assert config["clipped_global_norm"] == 1.0
    assert (config["weight_decay"], config["beta_2"], config["use_ema"],
            config["ema_momentum"]) == (0.5, 0.98, True, 0.9)
    assert isinstance(optimizer, keras.optimizers.AdamW)


@requires_tensorflow
@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_steps_timer_counts_steps_not_calls(tmp_path, steps_per_execution):
    import keras
    import numpy as np

    from recipes.core import run_directory

    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    fit_callbacks, timer, budget = callbacks.assemble_callbacks(
        run_dir, tensorboard=True, time_budget_minutes=5)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse",
                  steps_per_execution=steps_per_execution)
    x = np.zeros((24, 2), "float32")
    y = np.zeros((24, 1), "float32")
    history = model.fit(x, y, batch_size=4, epochs=2,
                        callbacks=fit_callbacks,
                        validation_data=(x, y), verbose=0)
    # 6 steps an epoch (2 calls of 3 steps with steps_per_execution=3).
    assert timer.steps == 12 and timer.seconds > 0
    assert history.history["steps_per_second"][-1] == pytest.approx(
        timer.steps_per_second)
    assert int(model.optimizer.iterations.numpy()) == 12
    assert not budget.stopped


@requires_tensorflow
def test_time_budget_stops_after_the_call_in_progress():
    import keras
    import numpy as np

    budget = timing.make_time_budget_callback(1.0)
    timer = timing.make_steps_timer()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=2)

    class Clock(keras.callbacks.Callback):  # two minutes pass at step 4
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 4:
                budget.start -= 120.0

    x = np.zeros((24, 2), "float32")
    y = np.zeros((24, 1), "float32")
    model.fit(x, y, batch_size=2, epochs=3, verbose=0,
              callbacks=[timer, Clock(), budget])
    # Steps 4 and 5 (the call starting when the budget ran out) run, then
    # training stops: 6 of the 12 steps of the first epoch.
    assert budget.stopped
    assert int(model.optimizer.iterations.numpy()) == 6
    assert timer.steps == 6


def test_training_speed_is_steps_per_second_times_tokens_per_step():
    lines = []
    speed = timing.training_speed(2.5, 4 * 16, "window positions",
                                  "steps/s x 4 x 16", lines.append)
    assert speed == {"tokens_per_second": 160.0,
                     "tokens_per_second_note": "steps/s x 4 x 16"}
    assert lines == ["Training speed: 2.50 steps/s, 160 tokens/s (window "
                     "positions)."]
    speed = timing.training_speed(0.0, 64, "x", "n", lines.append,
                                  about=True)
    assert speed["tokens_per_second"] is None and len(lines) == 1
    timing.training_speed(1.0, 1500.0, "source + target", "n", lines.append,
                          about=True)
    assert lines[-1] == ("Training speed: 1.00 steps/s, about 1,500 tokens/s "
                         "(source + target).")
