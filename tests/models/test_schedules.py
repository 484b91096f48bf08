"""`InverseSqrtSchedule`: values against NumPy, config, use in an optimizer."""

import keras
import numpy as np
import pytest

from keras_synth.models import InverseSqrtSchedule


def _numpy(peak, warmup, steps):
    n = np.asarray(steps, "float64") + 1.0
    return peak * np.minimum(n / warmup, np.sqrt(warmup / n))


def test_values_against_numpy():
    schedule = InverseSqrtSchedule(3e-3, warmup_steps=40)
    steps = [0, 1, 10, 38, 39, 40, 41, 100, 159, 1000, 123456]
    got = [float(keras.ops.convert_to_numpy(schedule(s))) for s in steps]
    np.testing.assert_allclose(got, _numpy(3e-3, 40, steps), rtol=1e-6)
    # The peak at step warmup_steps - 1, half of it at 4x that.
    assert got[steps.index(39)] == pytest.approx(3e-3)
    assert float(schedule(159)) == pytest.approx(1.5e-3)
    # A tensor step (the optimizer's iteration counter) too.
    step = keras.ops.convert_to_tensor(np.int64(100))
    assert float(schedule(step)) == pytest.approx(_numpy(3e-3, 40, 100))


def test_one_warmup_step_decays_from_the_first():
    schedule = InverseSqrtSchedule(1.0, warmup_steps=1)
    np.testing.assert_allclose([float(schedule(s)) for s in range(4)],
                               [1.0, 2 ** -0.5, 3 ** -0.5, 0.5], rtol=1e-6)


def test_config_round_trip():
    schedule = InverseSqrtSchedule(5e-4, warmup_steps=4000)
    assert schedule.get_config() == {"peak": 5e-4, "warmup_steps": 4000}
    restored = InverseSqrtSchedule.from_config(schedule.get_config())
    assert float(restored(2000)) == float(schedule(2000))
    serialized = keras.optimizers.schedules.serialize(schedule)
    assert serialized["registered_name"] == "keras_synth>InverseSqrtSchedule"
    restored = keras.optimizers.schedules.deserialize(serialized)
    assert isinstance(restored, InverseSqrtSchedule)
    assert restored.get_config() == schedule.get_config()


def test_drives_an_optimizer():
    schedule = InverseSqrtSchedule(0.1, warmup_steps=2)
    variable = keras.Variable(np.zeros(1, "float32"))
    optimizer = keras.optimizers.SGD(learning_rate=schedule)
    values = []
    for _ in range(4):
        optimizer.apply_gradients([(keras.ops.ones(1), variable)])
        values.append(float(keras.ops.convert_to_numpy(variable)[0]))
    # SGD moves by -lr(step) per unit gradient: the schedule's values.
    np.testing.assert_allclose(np.diff([0.0] + values),
                               -_numpy(0.1, 2, range(4)), rtol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"peak": 0.0, "warmup_steps": 10}, r"`peak`.*Received: peak=0.0"),
    ({"peak": float("inf"), "warmup_steps": 10}, r"peak=inf"),
    ({"peak": "1e-3", "warmup_steps": 10}, r"peak='1e-3'"),
    ({"peak": 1e-3, "warmup_steps": 0}, r"`warmup_steps`.*warmup_steps=0"),
    ({"peak": 1e-3, "warmup_steps": 2.5}, r"warmup_steps=2.5"),
    ({"peak": 1e-3, "warmup_steps": True}, r"warmup_steps=True"),
])
def test_bad_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        InverseSqrtSchedule(**kwargs)
