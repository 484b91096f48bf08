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
    with pytest.raises(ValueError, match=r"--epochs.*--epochs=0"):
        flags.positive("epochs", 0)
