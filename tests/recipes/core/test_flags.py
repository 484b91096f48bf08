"""recipes.core.flags."""

import argparse

import pytest

from recipes.core import flags


def test_common_flags():
    parser = argparse.ArgumentParser()
    flags.add_common_flags(parser)
    args = parser.parse_args(["--strategy=mirrored", "--batch_size=64",
                              "--mixed_precision=bfloat16", "--jit_compile"])
    assert (args.strategy, args.batch_size, args.mixed_precision,
            args.jit_compile) == ("mirrored", 64, "bfloat16", True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy=gpu"])

@pytest.mark.parametrize("argv, message", [
    (["--epochs=0"], "Argument `--epochs` must be positive. Received: "
     "--epochs=0"),
    (["--batch_size=-4"], "Argument `--batch_size` must be positive. "
     "Received: --batch_size=-4"),
    (["--batch_size=2.5"], "Argument `--batch_size` must be a positive "
     "integer. Received: --batch_size=2.5"),
    (["--learning_rate=0"], "Argument `--learning_rate` must be positive"),
    (["--learning_rate=fast"], "Argument `--learning_rate` must be a "
     "positive number. Received: --learning_rate=fast"),
    (["--time_budget_minutes=-1"], "Argument `--time_budget_minutes` must "
     "be positive"),
    (["--ema_momentum=1.5"], "Argument `--ema_momentum` must be in (0, 1), "
     "e.g. 0.999. Received: --ema_momentum=1.5"),
    (["--ema_momentum=0"], "Argument `--ema_momentum` must be positive"),
    (["--steps_per_execution=0"], "Argument `--steps_per_execution` must be "
     "positive. Received: --steps_per_execution=0"),
])
def test_positive_flags_are_checked_by_their_type(argv, message, capsys):
    from recipes import cli

    parser = cli.ArgumentParser(prog="recipe")
    flags.add_common_flags(parser)
    flags.add_time_budget_flag(parser)
    with pytest.raises(SystemExit) as exit:
        parser.parse_args(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert f"recipe: error: {message}" in err, err
    assert parser.parse_args(["--learning_rate=1e-4", "--epochs=2"]
                             ).learning_rate == 1e-4
    assert parser.parse_args(["--ema_momentum=0.999"]).ema_momentum == 0.999


def test_steps_per_execution_flag_defaults_per_device_and_divides_epochs():
    parser = argparse.ArgumentParser()
    flags.add_common_flags(parser)
    assert parser.parse_args([]).steps_per_execution is None
    assert parser.parse_args(
        ["--steps_per_execution=8"]).steps_per_execution == 8
    # One step per call off TPUs; on a TPU the largest divisor of the
    # epoch's steps up to 32 (an epoch ends with a call's last step).
    assert flags.steps_per_execution(None, "one_device", 100) == 1
    assert flags.steps_per_execution(None, "mirrored", 64) == 1
    assert flags.steps_per_execution(None, "tpu", 100) == 25
    assert flags.steps_per_execution(None, "tpu", 64) == 32
    assert flags.steps_per_execution(None, "tpu", 7) == 7
    assert flags.steps_per_execution(None, "tpu", 37) == 1
    assert flags.steps_per_execution(4, "one_device", 100) == 4
    assert flags.steps_per_execution(5, "tpu", 100) == 5
    with pytest.raises(ValueError, match=r"`--steps_per_execution` must "
                       r"divide the 10 training steps of an epoch.*"
                       r"Received: --steps_per_execution=4"):
        flags.steps_per_execution(4, "one_device", 10)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"`--steps_per_execution` must "
                           r"be a positive integer\. Received: "
                           rf"--steps_per_execution={bad}"):
            flags.steps_per_execution(bad, "tpu", 10)


def test_static_shapes_with_jit_compile_or_tpu(monkeypatch):
    def args(**values):
        return argparse.Namespace(**{"jit_compile": False,
                                     "strategy": "one_device", **values})

    for backend in ("tensorflow", "torch"):
        monkeypatch.setenv("KERAS_BACKEND", backend)
        assert not flags.static_shapes(args())
        assert not flags.static_shapes(args(strategy="mirrored"))
        assert flags.static_shapes(args(jit_compile=True))
        assert flags.static_shapes(args(strategy="tpu"))
        assert not flags.bucketed_shapes(args())
        assert not flags.keras_jit_compile(args())
        assert flags.keras_jit_compile(args(jit_compile=True))
    # JAX's `fit` compiles its step for every shape: batches padded up to a
    # few lengths (recipes.core.lengths), full length with XLA or a TPU.
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert not flags.static_shapes(args())
    assert flags.bucketed_shapes(args())
    assert flags.static_shapes(args(jit_compile=True))
    assert not flags.bucketed_shapes(args(jit_compile=True))
    # JAX's `fit` without jit runs each step eagerly, op by op.
    assert flags.keras_jit_compile(args())


def test_hidden_dim_must_be_a_multiple_of_num_heads():
    flags.check_hidden_dim(12, 4)
    flags.check_hidden_dim(8, 8)
    with pytest.raises(ValueError, match=r"`--hidden_dim` must be a "
                       r"multiple of `--num_heads`.*Received: "
                       r"--hidden_dim=10, --num_heads=4"):
        flags.check_hidden_dim(10, 4)
    with pytest.raises(ValueError, match=r"--hidden_dim=2, --num_heads=4"):
        flags.check_hidden_dim(2, 4)
