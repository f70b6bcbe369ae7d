"""Histograms of size tuples: the input of every packing algorithm.

A dataset of n graphs becomes a dict {size tuple: count}; for molecules that is a few
hundred bins however many molecules there are, which is why histogram packing is fast.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["histogram_arrays", "size_histogram"]


def _as_sizes(sizes: object, name: str = "sizes") -> np.ndarray:
    array = np.asarray(sizes)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name}: expected an [n, k] integer array, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.equal(np.mod(array, 1), 0)):
            raise ValueError(f"{name}: expected integer sizes, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        row = int(np.argwhere(array < 0)[0, 0])
        raise ValueError(f"{name}[{row}] = {array[row].tolist()} has a negative size")
    return array


def size_histogram(sizes: object) -> dict[tuple[int, ...], int]:
    """Count how many items have each size tuple.

    Args:
        sizes: [n, k] non-negative integers, e.g. (nodes, edges) per graph; a 1-D array
            is read as k = 1.

    Returns:
        {size tuple: count}, ordered by size tuple. O(n log n) via one sort of packed keys.

    Raises:
        ValueError: on a negative, non-integer or wrongly shaped input.
    """
    array = _as_sizes(sizes)
    if array.shape[0] == 0:
        return {}
    bins, counts = _unique_rows(array)
    return {tuple(row): int(c) for row, c in zip(bins.tolist(), counts.tolist())}


def _unique_rows(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Mixed-radix encoding turns k columns into one int64 key, so np.unique sorts scalars
    # (about 10x faster than unique(axis=0) on 1.6M rows).
    span = array.max(axis=0) + 1
    if np.prod(span.astype(float)) < 2**62:
        key = np.zeros(array.shape[0], dtype=np.int64)
        for column in range(array.shape[1]):
            key = key * span[column] + array[:, column]
        unique, counts = np.unique(key, return_counts=True)
        bins = np.empty((unique.size, array.shape[1]), dtype=np.int64)
        for column in range(array.shape[1] - 1, -1, -1):
            bins[:, column] = unique % span[column]
            unique = unique // span[column]
        return bins, counts
    return np.unique(array, axis=0, return_counts=True)


def histogram_arrays(histogram: Mapping[tuple[int, ...], int]) -> tuple[np.ndarray, np.ndarray]:
    """A histogram dict as (bins [B, k] int64, counts [B] int64), validated.

    Raises:
        ValueError: on tuples of different lengths, negative sizes or non-positive counts.
    """
    if not isinstance(histogram, Mapping):
        raise TypeError(f"histogram: expected a dict {{size tuple: count}}, got "
                        f"{type(histogram).__name__}; build one with size_histogram(sizes)")
    keys = [key if isinstance(key, tuple) else tuple(np.atleast_1d(key).tolist())
            for key in histogram]
    lengths = {len(key) for key in keys}
    if len(lengths) > 1:
        raise ValueError(f"histogram: size tuples have different lengths {sorted(lengths)}")
    k = lengths.pop() if lengths else 0
    bins = np.array(keys, dtype=np.int64).reshape(len(keys), k)
    raw = np.array(list(histogram.values()))
    counts = raw.astype(np.int64)
    bad = np.flatnonzero((counts != raw) | (counts < 1)) if raw.size else []
    if len(bad):
        key = keys[int(bad[0])]
        raise ValueError(f"histogram[{key}] = {histogram[key]!r}: counts must be positive "
                         "integers")
    if bins.size and bins.min() < 0:
        raise ValueError(f"histogram key {keys[int(np.argwhere(bins < 0)[0, 0])]} has a "
                         "negative size")
    return bins, counts
