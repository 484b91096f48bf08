"""The benchmark's reference rows (`--references`, `recipes.benchmark.
references`): Linformer, LightConv and DynamicConv against NumPy versions
with the same weights; their flags and errors; the convolution
synthesizers and the references as rows of `--mode train`."""

import math

import keras
import numpy as np
import pytest

from recipes.benchmark import flags
from recipes.benchmark import references
from recipes.benchmark import runner
from recipes.benchmark import training

B, T, D, H = 2, 9, 8, 2
K_DIM = D // H


def _inputs(seed=0, length=T):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, length, D)).astype("float32")
    mask = np.ones((B, length), bool)
    mask[1, length - 3:] = False
    return x, mask


def _randomize(layer, seed=1):
    """Non-zero random values for every weight (biases included)."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.standard_normal(weight.shape).astype("float32")
                      * 0.5)
    return {w.path.split("/")[-1]: keras.ops.convert_to_numpy(w)
            for w in layer.weights}


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def _project(x, w, name):
    return np.einsum("bsd,dhk->bshk", x, w[f"{name}_kernel"]) + (
        w[f"{name}_bias"])


def _output(heads, w):
    return np.einsum("bthk,hkd->btd", heads, w["output_kernel"]) + (
        w["output_bias"])


def numpy_linformer(x, w, mask=None):
    """Wang et al. 2020 written out: per head, keys and values projected
    along the length by E, F (k x n, first S columns), scaled dot product
    over the k projected rows; masked positions zeroed first."""
    s = x.shape[1]
    q, k, v = (_project(x, w, n) for n in ("query", "key", "value"))
    if mask is not None:
        k = k * mask[:, :, None, None]
        v = v * mask[:, :, None, None]
    heads = np.zeros_like(q)
    for b in range(x.shape[0]):
        for h in range(H):
            kp = w["E"][:, :s] @ k[b, :, h]  # (p, d_h)
            vp = w["F"][:, :s] @ v[b, :, h]
            probs = _softmax(q[b, :, h] @ kp.T / math.sqrt(K_DIM))
            heads[b, :, h] = probs @ vp
    return _output(heads, w)


def _sides(size, padding):
    return (size - 1, 0) if padding == "causal" else (
        (size - 1) // 2, size // 2)


def numpy_conv(x, w, size, padding, dynamic, mask=None, causal=False):
    """Wu et al. 2019 written out: y_h[t] = sum_j p_h[t, j] v_h[t + j -
    before], p the softmax of the head's kernel (LightConv) or of the
    token's predicted kernel (DynamicConv), keys outside the sequence
    zero; causal: taps after t dropped (not renormalised)."""
    n = x.shape[1]
    v = _project(x, w, "value")
    if mask is not None:
        v = v * mask[:, :, None, None]
    if dynamic:
        probs = _softmax(np.einsum("btd,dhk->bthk", x, w["dynamic_kernel"])
                         + w["dynamic_bias"])  # (B, T, H, K)
    else:
        probs = np.broadcast_to(_softmax(w["conv_kernel"]),
                                (x.shape[0], n, H, size))
    before, _ = _sides(size, padding)
    heads = np.zeros_like(v)
    for t in range(n):
        for j in range(size):
            s = t + j - before
            if not 0 <= s < n or (causal and s > t):
                continue
            heads[:, t] += probs[:, t, :, j, None] * v[:, s]
    return _output(heads, w)


@pytest.mark.parametrize("length, masked", [(T, False), (T, True), (6, True)])
def test_linformer_matches_numpy(length, masked):
    # max_length 9, k = 4: a shorter sequence uses E[:, :S] and F[:, :S].
    layer = references.Linformer(H, K_DIM, max_length=T, projected_length=4)
    x, mask = _inputs(length=length)
    mask = mask if masked else None
    layer(x, x)
    w = _randomize(layer)
    assert w["E"].shape == w["F"].shape == (4, T)
    got = layer(x, x, value_mask=mask)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(got),
                               numpy_linformer(x, w, mask),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cls, dynamic", [(references.LightConv, False),
                                          (references.DynamicConv, True)])
@pytest.mark.parametrize("size, padding, masked, causal", [
    (3, "centered", False, False),
    (4, "centered", True, False),  # even: one more key after t
    (5, "causal", True, False),
    (5, "centered", False, True),
])
def test_convolutions_match_numpy(cls, dynamic, size, padding, masked,
                                  causal):
    layer = cls(H, K_DIM, kernel_size=size, padding=padding)
    x, mask = _inputs()
    mask = mask if masked else None
    layer(x, x)
    w = _randomize(layer)
    got = layer(x, x, value_mask=mask, use_causal_mask=causal)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(got),
        numpy_conv(x, w, size, padding, dynamic, mask, causal),
        rtol=1e-4, atol=1e-4)


def test_reference_weights_shapes_and_configs():
    x, _ = _inputs()
    expected = {
        "linformer": {"query_kernel", "query_bias", "key_kernel",
                      "key_bias", "value_kernel", "value_bias",
                      "output_kernel", "output_bias", "E", "F"},
        "lightconv": {"value_kernel", "value_bias", "output_kernel",
                      "output_bias", "conv_kernel"},
        "dynamicconv": {"value_kernel", "value_bias", "output_kernel",
                        "output_bias", "dynamic_kernel", "dynamic_bias"},
    }
    for name in flags.REFERENCES:
        layer = references.make_reference(name, H, K_DIM, T, kernel_size=3,
                                          projected_length=4)
        y = layer(x, x)
        assert tuple(y.shape) == (B, T, D)
        assert {w.path.split("/")[-1] for w in layer.weights} == (
            expected[name])
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config


@pytest.mark.parametrize("make, message", [
    (lambda: references.Linformer(H, K_DIM, max_length=0),
     "`max_length` of Linformer, expected a positive integer. Received: "
     "max_length=0"),
    (lambda: references.Linformer(H, K_DIM, T, projected_length=2.5),
     "projected_length=2.5"),
    (lambda: references.LightConv(H, K_DIM, kernel_size=0),
     "`kernel_size` of LightConv, expected a positive integer. Received: "
     "kernel_size=0"),
    (lambda: references.DynamicConv(H, K_DIM, padding="same"),
     "`padding` of DynamicConv, expected one of ('centered', 'causal'). "
     "Received: padding='same'"),
    (lambda: references.LightConv(0, K_DIM), "num_heads=0"),
])
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


def test_bad_calls_are_errors():
    x, _ = _inputs()
    linformer = references.Linformer(H, K_DIM, max_length=T,
                                     projected_length=4)
    with pytest.raises(ValueError, match="use_causal_mask=True"):
        linformer(x, x, use_causal_mask=True)
    longer = np.concatenate([x, x], axis=1)
    with pytest.raises(ValueError, match="length 18; expected at most "
                       "max_length"):
        linformer(longer, longer)
    conv = references.LightConv(H, K_DIM)
    with pytest.raises(ValueError, match="query length 9, value length 18"):
        conv(x, longer)


# --------------------------------------------------------------- the flags


def test_reference_flags():
    args = flags.parse(["--references", "linformer,dynamicconv",
                        "--linformer_k", "64"])
    assert args.references == ["linformer", "dynamicconv"]
    assert args.linformer_k == 64
    # None by default; the default variants are the paper's (no
    # convolution); the convolution synthesizers are variants on request.
    default = flags.parse([])
    assert default.references == []
    assert not {"light_conv", "dynamic_conv"} & set(default.variants)
    args = flags.parse(["--variants", "light_conv,dynamic_conv+vanilla",
                        "--synthesizer_options", '{"kernel_size": 7}'])
    assert args.variants == ["light_conv", "dynamic_conv+vanilla"]
    assert args.synthesizer_options == {"kernel_size": 7}
    assert flags.conv_options(args, "light_conv") == (7, "centered")
    args = flags.parse(["--synthesizer_options",
                        '{"kernel_size": 7, "dynamic_conv": {"padding": '
                        '"causal", "kernel_size": 5}}'])
    assert flags.conv_options(args, "light_conv") == (7, "centered")
    assert flags.conv_options(args, "dynamic_conv") == (5, "causal")


def test_a_bad_reference_is_rejected_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        flags.build_parser().parse_args(["--references", "linformr"])
    err = capsys.readouterr().err
    assert "--references" in err and "'linformr'" in err
    assert "['linformer', 'lightconv', 'dynamicconv']" in err
    assert "Did you mean 'linformer'?" in err


@pytest.mark.parametrize("argv, message", [
    (["--references", "linformer", "--masks", "none,causal"],
     "--references linformer cannot run with --masks causal"),
    (["--mode", "generate", "--references", "lightconv"],
     "--references times --mode train only, received "
     "--references=lightconv with --mode generate"),
    (["--linformer_k", "0"], "--linformer_k must be a positive integer"),
    (["--references", "lightconv", "--synthesizer_options",
      '{"kernel_size": -2}'],
     "the lightconv reference's kernel_size must be a positive integer, "
     "received kernel_size=-2"),
    (["--references", "dynamicconv", "--synthesizer_options",
      '{"dynamic_conv": {"padding": "same"}}'],
     "received padding='same'"),
    (["--mode", "step", "--synthesizer_options", '{"kernel_size": 7}'],
     "--synthesizer_options reaches the rows of --mode train only, "
     "received it with --mode step"),
    (["--synthesizer_options", "kernel_size=3"],
     "Argument `--synthesizer_options` must be a JSON object"),
])
def test_bad_reference_values_name_the_flag(argv, message):
    with pytest.raises(SystemExit) as info:
        flags.parse(argv)
    assert message in str(info.value.code)


def test_worker_rejects_options_no_row_has():
    args = flags.parse(["--variants", "random", "--synthesizer_options",
                        '{"kernel_size": 5}'])
    with pytest.raises(SystemExit) as info:
        training.check_options(args)
    assert "`--synthesizer_options`" in str(info.value.code)
    assert "'kernel_size'" in str(info.value.code)
    # With a convolution reference, the window's options are its own.
    training.check_options(flags.parse(
        ["--variants", "random", "--references", "lightconv",
         "--synthesizer_options", '{"kernel_size": 5}']))


# ---------------------------------------------------------- the train rows


def test_forward_flops_of_the_new_rows_by_hand():
    b, t, d, h, size, p = 2, 16, 8, 2, 5, 4
    k = d // h
    value_and_output = 2 * (2 * b * t * d * h * k)
    args = flags.parse(["--synthesizer_options", '{"kernel_size": 5}',
                        "--linformer_k", "4"])
    taps = 2 * b * h * t * size * k
    # The convolution synthesizers run the windowed path: K taps, not S.
    assert training.forward_flops("light_conv", b, t, d, h, args=args) == (
        value_and_output + taps)
    projection = 2 * b * t * d * h * size
    assert training.forward_flops("dynamic_conv", b, t, d, h, args=args) == (
        value_and_output + taps + projection)
    assert training.forward_flops("lightconv", b, t, d, h, args=args) == (
        value_and_output + taps)
    assert training.forward_flops("dynamicconv", b, t, d, h, args=args) == (
        value_and_output + taps + projection)
    assert training.forward_flops("linformer", b, t, d, h, args=args) == (
        2 * value_and_output + 2 * (2 * b * h * p * t * k)
        + 2 * (2 * b * h * t * p * k))


def test_worker_rows_and_report(tmp_path):
    args = flags.parse([
        "--lengths", "16", "--hidden_dim", "8", "--num_heads", "2",
        "--tokens", "32", "--variants", "light_conv,dynamic_conv",
        "--references", "linformer,lightconv,dynamicconv",
        "--linformer_k", "4", "--synthesizer_options", '{"kernel_size": 5}',
        "--repetitions", "1", "--warmup", "0", "--memory-batch", "2",
        "--memory-length", "16", "--masks", "none,padding"])
    worker = training.run_worker(args)
    names = ["mha", "light_conv", "dynamic_conv", "linformer", "lightconv",
             "dynamicconv"]
    assert [r["row"] for r in worker["rows"]] == names * 2
    by = {r["row"]: r for r in worker["rows"] if r["mask"] == "none"}
    for r in worker["rows"]:
        assert r["train"]["median_ms"] > 0
        assert r["forward_flops"] == training.forward_flops(
            r["row"], r["batch"], r["length"], 8, 2, args=args)
    # Kernel size 5 everywhere: (H, K) kernels, (d, H, K) projections.
    value_and_output = 2 * (8 * 8 + 8)
    assert by["light_conv"]["params"] == value_and_output + 2 * 5
    assert by["lightconv"]["params"] == value_and_output + 2 * 5
    assert by["dynamic_conv"]["params"] == value_and_output + 8 * 2 * 5 + 10
    assert by["dynamicconv"]["params"] == value_and_output + 8 * 2 * 5 + 10
    assert by["linformer"]["params"] == 4 * (8 * 8 + 8) + 2 * 4 * 16
    if keras.backend.backend() != "torch":
        assert [e["row"] for e in worker["memory_probe"]] == names
    results = {"config": runner.config_of(args), "backends": [worker]}
    table = runner.summarize(results, str(tmp_path))
    for label in ("Linformer (reference)", "LightConv (reference)",
                  "DynamicConv (reference)", "| light_conv |",
                  "| dynamic_conv |"):
        assert label in table
