"""`recipes.core.lengths`: the few batch lengths of JAX runs."""

import numpy as np
import pytest

from recipes.core import lengths


@pytest.mark.parametrize("full, expected", [
    (128, (16, 32, 64, 128)), (100, (16, 32, 64, 100)), (16, (16,)),
    (17, (16, 17)), (12, (12,)), (1, (1,)), (4096, tuple(
        16 * 2 ** i for i in range(9)))])
def test_bucket_lengths(full, expected):
    assert lengths.bucket_lengths(full) == expected


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None, "64"])
def test_bucket_lengths_refuses_a_bad_full_length(bad):
    with pytest.raises(ValueError, match=r"`full_length` must be a positive "
                       rf"integer.*Received: full_length={bad!r}"):
        lengths.bucket_lengths(bad)


@pytest.mark.parametrize("full", [100, 128, 12])
def test_bucketed_length_is_the_smallest_bucket_that_holds_it(full):
    buckets = np.array(lengths.bucket_lengths(full))
    for length in range(1, full + 1):
        got = int(lengths.bucketed_length(np.int32(length), full))
        assert got == buckets[buckets >= length].min(), (length, got)
        assert length <= got <= max(2 * length, 16, length) or got == full
