"""Small array helpers shared by the parsers and the statistics."""

from __future__ import annotations

import numpy as np

__all__ = ["sorted_unique"]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values, like `np.unique(values)` but always by sorting.

    np.unique in numpy 2.x takes a hash-table path for plain calls that is ~40x slower
    than sorting on 2M int64 keys (6 s vs 0.15 s on the benchmark R-MAT graph).
    """
    ordered = np.sort(values, kind="stable" if values.dtype.kind in "US" else None)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
