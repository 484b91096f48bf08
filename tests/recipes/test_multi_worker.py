"""`--strategy=multi_worker` for real: two worker processes on 127.0.0.1.

Each worker is a `python -m recipes.glue` process limited to one CPU thread,
with a `TF_CONFIG` naming both (ports picked free at run time), as
docs/recipes/multi_worker.md launches them. Every process is bounded in
time and killed in teardown (`tests/recipes/cluster.py`). TensorFlow
backend only.
"""

import os
import time

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip(
        "tf.distribute.MultiWorkerMirroredStrategy is TensorFlow's (JAX's "
        "processes: test_jax_processes.py)",
        allow_module_level=True,
    )

from recipes.core import storage  # noqa: E402
from tests.recipes.cluster import Cluster  # noqa: E402
from tests.recipes.two_cpus import run_with_two_cpus  # noqa: E402

# A tiny model, two epochs of 6 steps (global batch 16: 8 per worker), no
# dropout (a resumed run draws other masks), fixed seed.
GLUE = ["--task=builtin", "--synthesizer=random+vanilla",
        "--max_train_examples=96", "--batch_size=16", "--epochs=2",
        "--max_length=24", "--hidden_dim=16", "--num_heads=2",
        "--num_layers=1", "--vocab_size=200", "--learning_rate=3e-3",
        "--dropout=0", "--verbose=2", "--no_tensorboard"]
STEPS_PER_EPOCH = 96 // 16
TIMEOUT = 420  # seconds for one run of the cluster (a loaded machine)


def _glue(model_dir, *extra):
    """`python -m recipes.glue` with a line after every training batch
    (`tests/recipes/progress_run.py`)."""
    return ["-m", "tests.recipes.progress_run", "recipes.glue",
            "--strategy=multi_worker", f"--model_dir={model_dir}",
            *GLUE, *extra]


def _weights(path):
    """Every array of a Keras `.weights.h5` file, by its path inside."""
    import h5py

    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: arrays.__setitem__(
            name, np.asarray(item)) if isinstance(item, h5py.Dataset)
            else None)
    return arrays


def _latest_weights(model_dir):
    """The weights file of the run directory's latest checkpoint."""
    backup = os.path.join(model_dir, "backup")
    with open(os.path.join(backup, "LATEST")) as f:
        return os.path.join(backup, f.read().strip(), "model.weights.h5")


def _assert_same_weights(a_path, b_path, atol=1e-5, gradient_free=None):
    """The arrays of two `.weights.h5` files agree within `atol`, except
    the entries `gradient_free` names: `{part of a weight's name: index of
    its entries (None: all)}`, weights whose gradient is zero in exact
    arithmetic. Round-off alone moves them, and it differs with the order
    of the float sums; Adam (epsilon 1e-9) turns a round-off gradient of
    1e-9 into a step as large as a real gradient's."""
    a, b = _weights(a_path), _weights(b_path)
    assert sorted(a) == sorted(b)
    gradient_free = gradient_free or {}
    skipped = 0
    for name in a:
        parts = [part for part in gradient_free if part in name]
        compared = np.ones(a[name].shape, bool)
        for part in parts:
            skipped += 1
            index = gradient_free[part]
            compared[... if index is None else index] = False
        np.testing.assert_allclose(a[name][compared], b[name][compared],
                                   rtol=0, atol=atol, err_msg=name)
    assert skipped <= 2 * len(gradient_free)  # a weight and its bias at most
    return a


def _mirrored(recipe, model_dir, arguments):
    """Runs `recipe` in one process with `--strategy=mirrored` on two
    logical CPUs; returns its exit status."""
    return run_with_two_cpus(f"""
        import json, sys
        from {recipe} import train
        print("RESULT " + json.dumps(train.main(sys.argv[1:])))
    """, "--strategy=mirrored", f"--model_dir={model_dir}", *arguments,
        "--no_export", timeout=TIMEOUT)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """An uninterrupted two-worker run: its folder and its workers' output."""
    root = tmp_path_factory.mktemp("two_workers")
    model_dir = str(root / "run")
    cluster = Cluster(_glue(model_dir), log_dir=str(root))
    try:
        codes = cluster.wait(TIMEOUT)
    finally:
        cluster.kill()
    outputs = [cluster.output(i) for i in range(2)]
    assert codes == {0: 0, 1: 0}, outputs[0][-3000:] + outputs[1][-3000:]
    return model_dir, outputs


def test_two_workers_train_as_one_process_on_two_cpus(two_workers, tmp_path):
    model_dir, outputs = two_workers
    results = storage.read_json(os.path.join(model_dir, "results.json"))
    assert results["num_replicas"] == 2
    assert results["optimizer_steps"] == 2 * STEPS_PER_EPOCH
    assert [h["epoch"] for h in results["history"]] == [1, 2]
    assert 0.0 <= results["metrics"]["dev"]["accuracy"] <= 1.0
    # Only the chief wrote the run directory: no worker folder, nothing
    # temporary; the other worker reports no results and no export.
    assert sorted(os.listdir(model_dir)) == sorted([
        "args.json", "attention.png", "backup", "export", "history.csv",
        "preset", "results.json", "submission", "vocab.txt"])
    assert "Results:" in outputs[0] and "Results:" not in outputs[1]
    assert "Exported" not in outputs[1]
    assert "Learned a WordPiece vocabulary" in outputs[0]
    assert "Learned a WordPiece vocabulary" not in outputs[1]  # the chief's

    # The SavedModel reloads and predicts the dev set as evaluated.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the export's tokenizer ops)

    from recipes.glue import loading
    from recipes.glue import tasks

    task = tasks.get_task("builtin")
    _, evals, _ = loading.load_task_data(task)
    dev = evals["dev"]
    serve = tf.saved_model.load(os.path.join(model_dir, "export")).signatures[
        "serving_default"]
    labels = serve(sentence=tf.constant(dev.column(0)))["label"].numpy()
    accuracy = float(np.mean(labels == np.asarray(dev.labels)))
    assert accuracy == pytest.approx(results["metrics"]["dev"]["accuracy"],
                                     abs=1e-6)

    # One process, MirroredStrategy over two logical CPUs, the same global
    # batch: the same weights and optimizer state (the gradients were
    # all-reduced over the two workers, each example seen once an epoch).
    mirrored_dir = str(tmp_path / "mirrored")
    assert _mirrored("recipes.glue", mirrored_dir, GLUE) == 0
    weights = _assert_same_weights(
        _latest_weights(model_dir),
        _latest_weights(mirrored_dir))
    assert any("optimizer" in name and float(np.abs(w).max()) > 0
               for name, w in weights.items())
    mirrored = storage.read_json(
        os.path.join(mirrored_dir, "results.json"))
    assert mirrored["num_replicas"] == 2
    np.testing.assert_allclose(
        [h["loss"] for h in results["history"]],
        [h["loss"] for h in mirrored["history"]], rtol=1e-5)
    assert results["metrics"] == mirrored["metrics"]


def test_a_killed_worker_resumes_to_the_uninterrupted_result(two_workers,
                                                            tmp_path):
    reference_dir, _ = two_workers
    model_dir = str(tmp_path / "run")
    command = _glue(model_dir, "--no_export")  # the reference's arguments

    # 1. Worker 1 is killed after 2 of epoch 2's batches; the chief stops
    # with an error saying how to resume.
    cluster = Cluster(command, log_dir=str(tmp_path))
    try:
        assert cluster.wait_for_line(1, "batch-end epoch=2 batch=2",
                                     TIMEOUT), cluster.output(1)[-3000:]
        cluster.kill(1)
        # A bound, not a speed: the chief stops as soon as TensorFlow's
        # collectives see the peer gone (seconds on an idle machine).
        codes = cluster.wait(240)
    finally:
        cluster.kill()
    chief = cluster.output(0)
    assert codes[1] == -9 and codes[0] == 2, chief[-3000:]
    assert "A worker of the cluster stopped" in chief, chief[-3000:]
    with open(os.path.join(model_dir, "backup", "LATEST")) as f:
        assert f.read() == "epoch-1\n"
    assert not os.path.exists(os.path.join(model_dir, "results.json"))

    # 2. Both started again with the same command (and addresses).
    os.makedirs(str(tmp_path / "restart"))
    restart = Cluster(command, ports=cluster.ports,
                      log_dir=str(tmp_path / "restart"))
    try:
        codes = restart.wait(TIMEOUT)
    finally:
        restart.kill()
    outputs = [restart.output(i) for i in range(2)]
    assert codes == {0: 0, 1: 0}, outputs[0][-3000:] + outputs[1][-3000:]
    for output in outputs:
        assert "Resuming after epoch 1 from" in output
        assert "batch-end epoch=1 " not in output
        assert output.count("batch-end epoch=2 ") == STEPS_PER_EPOCH

    # 3. The uninterrupted result: same weights, history and metrics.
    _assert_same_weights(
        _latest_weights(model_dir),
        _latest_weights(reference_dir))
    resumed = storage.read_json(os.path.join(model_dir, "results.json"))
    reference = storage.read_json(
        os.path.join(reference_dir, "results.json"))
    assert resumed["resumed_from_epoch"] == 1
    assert resumed["optimizer_steps"] == 2 * STEPS_PER_EPOCH
    assert [h["epoch"] for h in resumed["history"]] == [1, 2]
    for got, want in zip(resumed["history"], reference["history"]):
        for key in want:
            if key != "steps_per_second":
                np.testing.assert_allclose(got[key], want[key], rtol=1e-5,
                                           atol=1e-6, err_msg=key)
    assert resumed["metrics"] == reference["metrics"]
    assert not [n for n in os.listdir(model_dir) if "tmp" in n]
    assert sorted(os.listdir(os.path.join(model_dir, "backup"))) == [
        "LATEST", "epoch-2"]


def test_a_malformed_tf_config_is_a_clear_error(tmp_path):
    # Each kind of mistake is checked in tests/recipes/core/test_cluster.py;
    # here, that the recipe reports it at once and writes nothing.
    config = ('{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, '
              '"task": {"type": "worker", "index": 2}}')
    expected = "\"task\" index 2; the 'worker' job has 2 address(es)"
    cluster = Cluster(_glue(str(tmp_path / "run")), start=[0],
                      config=config, log_dir=str(tmp_path))
    codes = cluster.wait(120)
    output = cluster.output(0)
    assert codes == {0: 2}, output[-3000:]
    assert "python -m recipes.glue: error: Environment variable " \
        "`TF_CONFIG`" in output
    assert expected in output and "Received: TF_CONFIG=" in output
    assert not os.path.exists(str(tmp_path / "run"))


def test_a_worker_whose_peer_never_comes_up_stops_in_bounded_time(tmp_path):
    cluster = Cluster(_glue(str(tmp_path / "run"), "--cluster_timeout=10"),
                      start=[0], log_dir=str(tmp_path))
    codes = cluster.wait(120)
    output = cluster.output(0)
    # Ended by its watchdog (TensorFlow holds the process while it waits).
    assert codes == {0: -9}, output[-3000:]
    assert time.time() - cluster.started < 100
    assert "python -m recipes.glue: error: The cluster of TF_CONFIG " \
        "(127.0.0.1:" in output
    assert "was not up within --cluster_timeout=10 seconds" in output
    assert f"127.0.0.1:{cluster.ports[1]}" in output  # the missing peer


TRANSLATE = ["--src=de", "--tgt=en", "--dataset=builtin",
             "--synthesizer=random", "--epochs=1", "--max_train_examples=128",
             "--batch_size=32", "--max_length=24", "--hidden_dim=16",
             "--num_heads=2", "--num_layers=1", "--vocab_size=200",
             "--learning_rate=3e-3", "--warmup_steps=2", "--beam_size=1",
             "--dropout=0", "--verbose=2", "--no_tensorboard",
             "--max_decode_examples=40"]
DECODED = 40


def test_two_workers_translate_as_one_process_on_two_cpus(tmp_path):
    model_dir = str(tmp_path / "run")
    cluster = Cluster(["-m", "recipes.translate", "--strategy=multi_worker",
                       f"--model_dir={model_dir}", *TRANSLATE],
                      log_dir=str(tmp_path))
    try:
        codes = cluster.wait(TIMEOUT)
    finally:
        cluster.kill()
    outputs = [cluster.output(i) for i in range(2)]
    assert codes == {0: 0, 1: 0}, outputs[0][-3000:] + outputs[1][-3000:]
    results = storage.read_json(os.path.join(model_dir, "results.json"))
    assert results["num_replicas"] == 2
    assert 0.0 <= results["chrf"]["test"] <= 100.0
    assert "Results:" not in outputs[1] and "Exported" not in outputs[1]

    # The SavedModel reloads and translates the test split as the run did
    # (the chief's hypotheses, decoded in process by the trained model),
    # so its chrF is the one reported.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the export's tokenizer ops)

    from recipes.translate import data as data_lib
    from recipes.translate import train as translate_train

    test = data_lib.load_files(data_lib.builtin_files("de", "en"))["test"]
    assert results["decoded_pairs"]["test"] == {"decoded": DECODED,
                                                "of": len(test)}
    test = test.head(DECODED)  # the pairs the run decoded and scored
    translate = tf.saved_model.load(
        results["export"]).signatures["translate"]
    exported = []
    for start in range(0, len(test.src), 50):
        out = translate(source=tf.constant(test.src[start:start + 50]))
        exported += [t.decode("utf-8") for t in out["translation"].numpy()]
    with open(results["hypotheses"]["test"], encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    assert len(exported) == len(hypotheses) == len(test.src) > 0
    assert exported == hypotheses
    assert any(exported), "every translation is empty"
    assert translate_train.score(exported, test.tgt)["chrf"] == (
        pytest.approx(results["chrf"]["test"], abs=1e-9))

    # The same weights as one process on two logical CPUs.
    mirrored_dir = str(tmp_path / "mirrored")
    assert _mirrored("recipes.translate", mirrored_dir, TRANSLATE) == 0
    # Each worker cuts its half-batch to its own longest sentence (one
    # process cuts the whole batch): the float sums differ in order, and
    # weights without a gradient move by round-off alone. Two kinds:
    # - the key bias of the cross-attention's dot product (a constant
    #   added to all of a query's logits leaves the softmax unchanged);
    # - the decoder's random synthesizer logit of query 0 for key 0, the
    #   only key the causal mask lets it see (a softmax over one logit is
    #   1 whatever the logit): its round-off gradient is about 1e-9, the
    #   other logits' 1e-3.
    _assert_same_weights(
        _latest_weights(model_dir),
        _latest_weights(mirrored_dir),
        gradient_free={
            "cross_attention/synthesizers/vanilla_synthesizer/key_dense/"
            "vars/1": None,
            "synthesizer_decoder/self_attention/synthesizers/"
            "random_synthesizer/vars/0": np.s_[:, 0, 0]})
    mirrored = storage.read_json(
        os.path.join(mirrored_dir, "results.json"))
    for got, want in zip(results["history"], mirrored["history"]):
        for key in ("loss", "token_accuracy", "val_loss",
                    "val_token_accuracy"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5,
                                       err_msg=key)
    np.testing.assert_allclose(results["chrf"]["test"],
                               mirrored["chrf"]["test"], atol=1e-6)
