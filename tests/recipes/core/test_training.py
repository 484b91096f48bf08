"""recipes.core.training."""

import pytest

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
