"""MirroredStrategy over two logical CPU devices (TensorFlow backend only).

Logical devices must be configured before TensorFlow initialises, so the
check runs in a fresh Python process and leaves this one alone.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "tf.distribute.MirroredStrategy is TensorFlow's (JAX's data "
        "parallelism, keras.distribution: test_recipes_on_backends.py)",
        allow_module_level=True,
    )

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    import keras
    import numpy as np
    from recipes.core import compute
    from recipes.core import vocabulary
    from recipes.glue import loading, tasks, train
    from recipes.glue import model as model_lib

    task = tasks.get_task("builtin")
    data, _, _ = loading.load_task_data(task)
    texts = data.column(0)[:16]
    labels = np.asarray(data.labels[:16], dtype="int32")
    vocab = vocabulary.learn_wordpiece_vocabulary(data.column(0)[:500], 200)
    pre = model_lib.make_preprocessor(vocab, 24)

    from recipes.core import training

    def first_step(strategy, weights=None, clip=None):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model, _ = model_lib.build_model(
                len(vocab), 2, 1, 24, synthesizer="random+vanilla",
                hidden_dim=16, num_layers=2, num_heads=2, dropout=0.0)
            if weights is not None:
                model.set_weights(weights)
            # Plain SGD: an update proportional to the gradient. (Adam's
            # first step, lr * g / |g|, turns round-off in near-zero
            # gradients into +-lr and is no test of equality.) With
            # `clip`, the recipes' clipping (the summed gradient's global
            # norm, after the all-reduce).
            optimizer = (keras.optimizers.SGD(learning_rate=0.5)
                         if clip is None else
                         training.clipped_after_all_reduce(
                             keras.optimizers.SGD, clip, learning_rate=0.5))
            model.compile(
                optimizer=optimizer,
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
        dataset = tf.data.Dataset.from_tensor_slices(
            (texts, labels)).batch(16).map(
                lambda x, y: (model_lib.pack(pre, (x,)), y))
        initial = [w.copy() for w in model.get_weights()]
        trainable = [keras.ops.convert_to_numpy(v).copy()
                     for v in model.trainable_weights]
        loss = model.fit(dataset, epochs=1, verbose=0,
                         shuffle=False).history["loss"][0]
        if clip is not None:  # the trainable weights, before and after
            return trainable, [keras.ops.convert_to_numpy(v)
                               for v in model.trainable_weights], loss
        return initial, model.get_weights(), loss

    one = compute.select_strategy("one_device")
    mirrored = compute.select_strategy("mirrored")
    initial, after_one, loss_one = first_step(one)
    _, after_two, loss_two = first_step(mirrored, initial)
    changed = max(float(np.abs(a - b).max())
                  for a, b in zip(initial, after_one))
    difference = max(float(np.abs(a - b).max())
                     for a, b in zip(after_one, after_two))

    def norm(before, after):  # of the update, over all weights
        return float(np.sqrt(sum(np.sum((a - b) ** 2)
                                 for a, b in zip(before, after))))

    # The gradient's global norm (a clip far above it), then a clip at a
    # quarter of it.
    trainable, unclipped, _ = first_step(one, initial, clip=1e9)
    gradient_norm = norm(trainable, unclipped) / 0.5
    clip = gradient_norm / 4
    _, clipped_one, _ = first_step(one, initial, clip=clip)
    _, clipped_two, _ = first_step(mirrored, initial, clip=clip)
    clipped_difference = max(float(np.abs(a - b).max())
                             for a, b in zip(clipped_one, clipped_two))

    results = train.run(train.build_parser().parse_args([
        "--task=builtin", "--strategy=mirrored", "--epochs=2",
        "--max_train_examples=128", "--batch_size=32", "--max_length=24",
        "--hidden_dim=16", "--num_heads=2", "--num_layers=1",
        "--vocab_size=200", "--learning_rate=3e-3", "--verbose=0",
        "--no_export", "--no_tensorboard", "--model_dir=" + sys.argv[1]]),
        log=lambda *_: None)
    print("RESULT " + json.dumps({
        "replicas": mirrored.num_replicas_in_sync,
        "loss_one": loss_one, "loss_two": loss_two,
        "changed": changed, "difference": difference,
        "gradient_norm": gradient_norm, "clip": clip,
        "clipped_step_one": norm(trainable, clipped_one) / 0.5,
        "clipped_step_two": norm(trainable, clipped_two) / 0.5,
        "clipped_changed": norm(trainable, clipped_one),
        "clipped_difference": clipped_difference,
        "recipe_replicas": results["num_replicas"],
        "losses": [h["loss"] for h in results["history"]],
        "accuracy": results["metrics"]["dev"]["accuracy"],
        "last_epoch_accuracy": results["history"][-1]["dev_accuracy"],
    }))
    """
)


def test_mirrored_two_cpus_matches_one_device_clipped_too_and_trains(
        tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    lines = [line for line in process.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["replicas"] == 2
    # The first step moves the weights, identically on 1 and 2 replicas
    # (global batch 16 = 2 x 8: the loss is scaled by the global batch and
    # the gradients are summed over replicas).
    assert result["changed"] > 1e-3
    assert result["difference"] < 1e-5 * max(1.0, result["changed"]), result
    assert abs(result["loss_one"] - result["loss_two"]) < 1e-5, result
    # Clipped: the clip binds (the gradient's global norm is 4 x the
    # clip), one device steps by exactly the clip, and two replicas take
    # the same step (each replica clipping its half of the gradient before
    # the all-reduce, as Keras' own `clipnorm`/`global_clipnorm` do, steps
    # up to twice as far, in another direction).
    assert result["gradient_norm"] > 3.9 * result["clip"] > 0, result
    assert result["clipped_step_one"] == pytest.approx(result["clip"],
                                                       rel=1e-4), result
    assert result["clipped_step_two"] == pytest.approx(result["clip"],
                                                       rel=1e-4), result
    assert result["clipped_difference"] < 1e-5 * max(
        1.0, result["clipped_changed"]), result
    # The recipe itself trains on two replicas.
    assert result["recipe_replicas"] == 2
    assert all(loss == loss for loss in result["losses"])  # not NaN
    assert result["losses"][-1] < result["losses"][0]
    # The final dev accuracy is the last epoch's evaluation (same weights),
    # computed by another code path under the strategy.
    assert result["accuracy"] == pytest.approx(
        result["last_epoch_accuracy"], abs=1e-6)
