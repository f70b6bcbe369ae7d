"""`prefetch` compiles for the array types the kernels use and changes nothing."""

import numba
import numpy as np
import pytest

from gnnforge.sampling._cache_hint import prefetch


@numba.njit
def _sum_with_hints(values, ahead):
    total = 0.0
    for j in range(values.shape[0]):
        if j + ahead < values.shape[0]:
            prefetch(values, j + ahead)
        total += values[j]
    return total


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_prefetch_is_only_a_hint(dtype):
    values = np.arange(1000, dtype=dtype)
    before = values.copy()
    assert _sum_with_hints(values, 32) == float(before.sum())
    np.testing.assert_array_equal(values, before)
    assert _sum_with_hints(values[:0], 32) == 0.0


def test_prefetch_needs_an_array_and_an_integer_index():
    @numba.njit
    def hint_a_scalar(value):
        prefetch(value, 0)

    with pytest.raises(numba.core.errors.TypingError):
        hint_a_scalar(1.0)
