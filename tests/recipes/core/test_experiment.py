"""recipes.core.experiment: the fit-evaluate-export skeleton, on a tiny
regression model (TensorFlow backend, as the recipes)."""

import argparse
import json

import keras
import numpy as np
import pytest

from recipes.core import callbacks
from recipes.core import experiment
from recipes.core import run_directory
from tests.recipes.core.tensorflow_only import requires_tensorflow

pytestmark = requires_tensorflow


def make_args(**overrides):
    values = dict(epochs=2, verbose=0, tensorboard=False, export=True,
                  seed=0)
    values.update(overrides)
    return argparse.Namespace(**values)


def data(epochs):
    import tensorflow as tf

    x = np.linspace(-1, 1, 32, dtype="float32")[:, None]
    dataset = tf.data.Dataset.from_tensor_slices((x, 3 * x))
    return dataset.batch(8).repeat(epochs)


def build():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def run(tmp_path, args, calls, **kwargs):
    import tensorflow as tf

    run_dir = run_directory.RunDirectory(str(tmp_path), vars(args))

    def evaluate(model, run):
        calls.append(("evaluate", run["resumed_from_epoch"]))
        return {"weight": float(model.layers[0].kernel.numpy()[0, 0])}

    def export(model):
        calls.append(("export",))
        return {"export": "somewhere"}

    return experiment.train_and_evaluate(
        args, run_dir, tf.distribute.get_strategy(), build,
        data(args.epochs), 4, evaluate, export=export,
        describe=lambda n: f"{n} parameters", log=calls.append, **kwargs)


def test_trains_evaluates_exports_and_writes_results(tmp_path):
    calls = []
    results = run(tmp_path, make_args(), calls)
    assert calls[0] == "2 parameters"
    assert ("evaluate", 0) in calls and ("export",) in calls
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == json.loads(json.dumps(results, default=str))
    assert results["export"] == "somewhere"
    assert (results["parameters"], results["epochs"], results["train_steps"],
            results["optimizer_steps"]) == (2, 2, 8, 8)
    assert [h["epoch"] for h in results["history"]] == [1, 2]
    assert results["history"][1]["loss"] < results["history"][0]["loss"]
    assert results["steps_per_second"] > 0
    assert results["args"]["epochs"] == 2
    assert "stopped_by_time_budget" not in results
    # The run is done: started again, it restores and skips `fit`.
    calls = []
    again = run(tmp_path, make_args(), calls)
    assert ("evaluate", 2) in calls
    assert again["weight"] == pytest.approx(results["weight"])
    assert again["history"] == results["history"]
    assert again["steps_per_second"] == results["history"][-1][
        "steps_per_second"]


def test_callbacks_in_order_and_fit_hooks(tmp_path):
    import keras

    seen = []

    class Extra(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            # After the timer, before the checkpoint records the logs.
            seen.append("steps_per_second" in logs)
            logs["extra_metric"] = float(epoch)

    entered = []

    class Context:
        def __init__(self, model):
            entered.append(model)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            entered.append("exit")

    args = make_args(epochs=1, time_budget_minutes=None)
    results = run(tmp_path, args, [], extra_callbacks=[Extra()],
                  fit_context=Context)
    assert seen == [True]
    assert results["history"][0]["extra_metric"] == 0.0
    assert entered[-1] == "exit" and len(entered) == 2
    assert results["stopped_by_time_budget"] is False


def test_assemble_callbacks(tmp_path):
    run_dir = run_directory.RunDirectory(str(tmp_path), {"a": 1})
    extra = keras.callbacks.Callback()
    found, timer, budget = callbacks.assemble_callbacks(
        run_dir, tensorboard=True, time_budget_minutes=5, extra=[extra])
    # The checkpoint records the logs the timer and `extra` added.
    assert found[0] is timer and found[1] is extra
    assert isinstance(found[2], keras.callbacks.TensorBoard)
    assert type(found[3]).__name__ == "Checkpoint"
    assert found[4] is budget and len(found) == 5
    found, _, budget = callbacks.assemble_callbacks(
        run_dir, tensorboard=False)
    assert budget is None and len(found) == 2
