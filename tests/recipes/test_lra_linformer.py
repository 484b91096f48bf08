"""`python -m recipes.lra --attention=linformer`: the Linformer-style
baseline differs from the Synthesizer models in the attention layer only
(the same backbone and block weights but the attention's; a block's output
computed by hand from the reference Linformer and NumPy), it trains end to
end, resumes after a kill, and writes no export that needs `recipes` to
load. The layer tests run on every backend; the run on TensorFlow."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from recipes.benchmark import references
from recipes.lra import linformer
from tests.recipes.core.tensorflow_only import requires_tensorflow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SIZES = dict(vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8,
             intermediate_dim=16, max_sequence_length=12, pooling="cls",
             dropout=0.0)


def _inputs():
    return {"token_ids": np.arange(24, dtype="int32").reshape(2, 12) % 20,
            "segment_ids": np.zeros((2, 12), "int32"),
            "padding_mask": (np.arange(12)[None] < np.array([[12], [7]])
                             ).astype("int32")}


def test_backbone_differs_in_the_attention_only():
    base = linformer.SynthesizerBackbone(synthesizer="vanilla", **SIZES)
    backbone = linformer.LinformerBackbone(synthesizer="vanilla",
                                           projected_length=4, **SIZES)
    assert isinstance(backbone, linformer.SynthesizerBackbone)
    for block in backbone.transformer_layers:
        assert type(block) is linformer.LinformerEncoder
        assert isinstance(block, keras.layers.Layer)
        assert type(block.self_attention) is linformer.LinformerAttention
        assert isinstance(block.self_attention, references.Linformer)
        assert block.self_attention.projected_length == 4
    assert backbone.projected_length == 4

    def outside_attention(model):
        return [(w.path, tuple(w.shape)) for w in model.weights
                if "/self_attention_layer/" not in w.path]

    assert outside_attention(backbone) == outside_attention(base)
    scores = backbone.attention_scores(_inputs())
    assert [tuple(s.shape) for s in scores] == [(2, 2, 12, 4)] * 2
    assert backbone.get_config()["projected_length"] == 4
    with pytest.raises(ValueError, match="projected_length=13"):
        linformer.LinformerBackbone(synthesizer="vanilla",
                                    projected_length=13, **SIZES)


def _layer_norm(x, gamma, beta, epsilon=1e-5):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_block_is_the_encoder_block_around_the_reference_linformer():
    """The block's output equals the post-LN Transformer block computed by
    hand (NumPy) around the benchmark's reference `Linformer` holding the
    block's attention weights."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 4)).astype("float32")
    mask = np.arange(6)[None] < np.array([[6], [4]])
    block = linformer.LinformerEncoder(
        intermediate_dim=8, num_heads=2, max_length=6, projected_length=3,
        synthesizer="vanilla")
    block(x, padding_mask=mask)
    for weight in block.weights:  # non-trivial norms and biases too
        weight.assign(rng.normal(size=weight.shape).astype("float32") * 0.5)
    got = keras.ops.convert_to_numpy(block(x, padding_mask=mask))

    reference = references.Linformer(2, 2, max_length=6, projected_length=3)
    reference(x, x)
    reference.set_weights(block.self_attention.get_weights())
    attended = keras.ops.convert_to_numpy(reference(x, x, value_mask=mask))
    w = {v.path.split("/", 1)[1]: keras.ops.convert_to_numpy(v)
         for v in block.weights}
    y = _layer_norm(x + attended, w["self_attention_layer_norm/gamma"],
                    w["self_attention_layer_norm/beta"])
    hidden = np.maximum(y @ w["feedforward_intermediate_dense/kernel"]
                        + w["feedforward_intermediate_dense/bias"], 0)
    out = _layer_norm(
        y + hidden @ w["feedforward_output_dense/kernel"]
        + w["feedforward_output_dense/bias"],
        w["feedforward_layer_norm/gamma"], w["feedforward_layer_norm/beta"])
    np.testing.assert_allclose(got, out, rtol=1e-4, atol=1e-4)


def test_attention_refuses_an_attention_mask():
    layer = linformer.LinformerAttention(2, 2, max_length=6,
                                         projected_length=3)
    x = np.zeros((1, 6, 4), "float32")
    with pytest.raises(ValueError, match="no `attention_mask`"):
        layer(x, x, attention_mask=np.ones((1, 6, 6), bool))


@requires_tensorflow
def test_baseline_trains_resumes_and_skips_exports(tmp_path):
    """Killed in its second epoch, run again with the same flags: it
    resumes, finishes, reports accuracy and why nothing was exported."""
    from tests.recipes import progress_run

    run_dir = str(tmp_path / "run")
    argv = [sys.executable, "-m", "tests.recipes.progress_run",
            "recipes.lra", "--task=text", "--attention=linformer",
            "--linformer_k=16", "--max_length=64", "--hidden_dim=16",
            "--num_heads=2", "--num_layers=1", "--batch_size=8",
            "--max_train_examples=32", "--epochs=2", "--steps_per_epoch=2",
            "--seed=0", "--verbose=2", "--no_tensorboard",
            f"--model_dir={run_dir}"]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONUNBUFFERED="1",
               PYTHONPATH=REPO)
    first = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    progress_run.kill_at(first, epoch=2, batch=1)
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 x LinformerEncoder(k=16)" in done.stdout
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["resumed_from_epoch"] == 1
    assert results["optimizer_steps"] == 4
    assert results["attention"] == "linformer"
    assert results["linformer_k"] == 16 and results["synthesizer"] is None
    assert results["attention_path"] == "linformer"
    assert 0.0 <= results["metrics"]["test"]["accuracy"] <= 1.0
    assert "recipes/lra/linformer.py" in results["export_skipped"]
    assert results["preset"] is None and results["export"] is None
    assert not os.path.exists(os.path.join(run_dir, "preset"))
    assert not os.path.exists(os.path.join(run_dir, "export"))
