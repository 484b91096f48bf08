"""The training benchmark's PyTorch device handling, checked on a CPU.

On a GPU, PyTorch's layer weights live on CUDA and its kernels run
asynchronously: the benchmark must build its inputs on the weights' device,
time the matmul baseline on that device, and synchronize CUDA around every
timed call. Here `torch.cuda.synchronize` is replaced by a recorder and the
"meta" device stands for a device other than the CPU.
"""

import types

import keras
import numpy as np
import pytest

from recipes.benchmark import training_backends

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the benchmark's PyTorch path (torch backend only)")


@pytest.fixture
def synchronized(monkeypatch):
    """The devices `torch.cuda.synchronize` was called with, in order,
    with the timed function's calls ("call") between them."""
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize",
                        lambda device=None: calls.append(str(device)))
    return calls


def _row(mask="padding"):
    keras.utils.set_random_seed(0)
    layer = training_backends.make_layer("random", 2, 8, 16, "float32")
    return training_backends.Row("random", layer, 2, 16, 8, mask, 1)


def test_timed_calls_synchronize_a_cuda_device(synchronized):
    import torch

    backend = training_backends.Backend("torch")
    row = _row()
    row.fns = {"train": lambda: synchronized.append("call")}
    row.device = torch.device("cuda:0")
    assert backend.run(row, "train") >= 0
    assert synchronized == ["cuda:0", "call", "cuda:0"]
    del synchronized[:]
    row.device = torch.device("cpu")
    backend.run(row, "train")
    assert synchronized == ["call"]  # nothing to wait for on the CPU


def test_inputs_are_made_on_the_weights_device(monkeypatch):
    import torch

    backend = training_backends.Backend("torch")
    row = _row()
    backend.prepare(row, forward=True)
    weights_device = row.layer.weights[0].value.device
    assert row.device == weights_device
    x, y, mask = row._torch
    assert {x.device, y.device, mask.device} == {weights_device}
    np.testing.assert_array_equal(x.numpy(), row.x)
    np.testing.assert_array_equal(mask.numpy(), row.value_mask)

    # Weights elsewhere (e.g. CUDA): the inputs follow them.
    meta = torch.device("meta")
    monkeypatch.setattr(training_backends, "torch_device",
                        lambda variables=(): meta)
    other = _row()
    backend._prepare_torch(other, forward=False)
    assert other.device == meta
    assert {t.device for t in other._torch} == {meta}


def test_torch_device_is_the_first_weights_device_or_keras_default():
    import torch

    meta = types.SimpleNamespace(value=torch.empty(1, device="meta"))
    assert training_backends.torch_device([meta]) == torch.device("meta")
    from keras.src.backend.torch.core import get_device

    assert training_backends.torch_device() == torch.device(get_device())


def test_matmul_baseline_runs_and_waits_on_the_rows_device(monkeypatch,
                                                           synchronized):
    import torch

    backend = training_backends.Backend("torch")
    product = backend._matmul_torch(8)
    assert product().device == training_backends.torch_device()
    # On a CUDA device the product is waited for inside the timed call.
    monkeypatch.setattr(training_backends, "torch_device",
                        lambda variables=(): torch.device("meta"))
    real_synchronize = training_backends.synchronize
    waited = []
    monkeypatch.setattr(training_backends, "synchronize",
                        lambda device: (waited.append(str(device)),
                                        real_synchronize(device)))
    product = backend._matmul_torch(8)
    assert product().device == torch.device("meta")
    assert waited == ["meta"]
    real_synchronize(torch.device("cuda"))
    assert synchronized == ["cuda"]
