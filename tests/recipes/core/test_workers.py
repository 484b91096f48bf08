"""recipes.core.workers: what the workers of one run do together (the
batch shares and the local model: tests/recipes/test_jax_processes.py)."""

from recipes.core import compute
from recipes.core import workers
from tests.recipes.core.tensorflow_only import requires_tensorflow


@requires_tensorflow
def test_chief_first_is_prepare_without_a_cluster(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    calls = []
    strategy = compute.select_strategy("one_device")
    assert workers.chief_first(
        strategy, lambda: calls.append(1) or "ready") == "ready"
    assert calls == [1]
