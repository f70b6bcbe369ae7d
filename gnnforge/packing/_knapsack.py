"""Exact pricing for column generation: a bounded multi-dimensional knapsack.

Given dual values pi_i >= 0 per bin, find the pattern a (0 <= a_i <= count_i, sum_i a_i
s_ik <= limit_k for every component k, sum_i a_i <= max_items) maximising pi . a.

Two exact solvers:

- `knapsack_dp`: dynamic programming over the capacity grid prod_k (limit_k + 1), with
  each bin's count split into binary chunks (1, 2, 4, ..., rest) so that the bounded
  knapsack becomes a 0/1 knapsack. Bins with pi_i = 0 are skipped (they add nothing).
  O(S * C * k) time for S grid points and C chunks, and S * C / 8 bytes of take-bits to
  rebuild the pattern. Used when the graph cap cannot bind and the grid is small enough
  (molecule datasets: S = 20,000 to 40,000, milliseconds).
- `knapsack_milp`: HiGHS through scipy's `milp`, for everything else (graph cap that can
  bind, large limits). It returns a proven upper bound even when time-limited.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["knapsack_dp", "knapsack_milp", "solve_knapsack"]

# Largest DP: grid points x chunks (each chunk costs one pass over the grid) and the
# take-bits it needs (grid points x chunks / 8 bytes).
_DP_WORK = 2e8
_DP_BYTES = 64 * 2**20


@numba.njit(cache=True, nogil=True)
def _dp(weights: np.ndarray, values: np.ndarray, strides: np.ndarray, digits: np.ndarray,
        take: np.ndarray) -> np.ndarray:
    """0/1 knapsack over a mixed-radix capacity grid; best[c] = best value within c."""
    size = digits.shape[0]
    k = digits.shape[1]
    best = np.zeros(size, dtype=np.float64)
    for chunk in range(weights.shape[0]):
        offset = 0
        for j in range(k):
            offset += weights[chunk, j] * strides[j]
        value = values[chunk]
        byte = chunk >> 3
        bit = np.uint8(1 << (chunk & 7))
        for c in range(size - 1, -1, -1):
            fits = True
            for j in range(k):
                if digits[c, j] < weights[chunk, j]:
                    fits = False
                    break
            if fits:
                candidate = best[c - offset] + value
                if candidate > best[c]:
                    best[c] = candidate
                    take[byte, c] |= bit
    return best


def _max_items(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray) -> float:
    """An upper bound on items in one pack from the size limits alone (inf if unbounded)."""
    bound = math.inf
    for k in range(limits.size):
        order = np.argsort(bins[:, k], kind="stable")
        sizes, numbers = bins[order, k], counts[order]
        if (sizes == 0).any() and sizes.size == (sizes == 0).sum():
            continue
        room, items = int(limits[k]), 0
        for size, number in zip(sizes.tolist(), numbers.tolist()):
            take = number if size == 0 else min(number, room // size)
            items += take
            room -= take * size
            if take < number:
                break
        bound = min(bound, items)
    return bound


def knapsack_dp(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray, pi: np.ndarray
                ) -> tuple[np.ndarray, float] | None:
    """Exact (pattern, value) by dynamic programming, or None when the grid is too large."""
    useful = np.flatnonzero(pi > 0)
    chunk_bin, chunk_copies = [], []
    for i in useful.tolist():
        left, piece = int(counts[i]), 1
        while left > 0:
            take = min(piece, left)
            chunk_bin.append(i)
            chunk_copies.append(take)
            left -= take
            piece *= 2
    grid = limits.astype(np.int64) + 1
    size = int(np.prod(grid.astype(np.float64)))
    if size * max(len(chunk_bin), 1) > _DP_WORK or size * (len(chunk_bin) // 8 + 1) > _DP_BYTES:
        return None
    pattern = np.zeros(counts.size, dtype=np.int64)
    if not chunk_bin:
        return pattern, 0.0
    chunk_bin_array = np.asarray(chunk_bin, dtype=np.int64)
    copies = np.asarray(chunk_copies, dtype=np.int64)
    weights = bins[chunk_bin_array] * copies[:, None]  # [C, k]
    values = pi[chunk_bin_array] * copies
    strides = np.concatenate([np.cumprod(grid[::-1])[::-1][1:], [1]]).astype(np.int64)
    digits = (np.arange(size, dtype=np.int64)[:, None] // strides) % grid  # [S, k]
    take = np.zeros(((len(chunk_bin) + 7) // 8, size), dtype=np.uint8)
    best = _dp(weights, values, strides, digits, take)
    c = size - 1  # the full capacity
    for chunk in range(len(chunk_bin) - 1, -1, -1):
        if take[chunk >> 3, c] >> (chunk & 7) & 1:
            pattern[chunk_bin[chunk]] += chunk_copies[chunk]
            c -= int(weights[chunk] @ strides)
    return pattern, float(best[-1])


def knapsack_milp(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                  max_items: int | None, pi: np.ndarray, time_limit: float
                  ) -> tuple[np.ndarray | None, float]:
    """(best pattern found or None, proven upper bound on the optimum; inf if none)."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # slow to import: only here

    rows = [bins.T.astype(np.float64)]
    upper = [limits.astype(np.float64)]
    if max_items:
        rows.append(np.ones((1, counts.size)))
        upper.append(np.array([float(max_items)]))
    result = milp(-pi, constraints=LinearConstraint(np.vstack(rows), -np.inf,
                                                    np.concatenate(upper)),
                  integrality=np.ones(counts.size), bounds=Bounds(0, counts.astype(np.float64)),
                  options={"time_limit": max(time_limit, 0.05), "mip_rel_gap": 1e-7})
    dual = getattr(result, "mip_dual_bound", None)
    upper_bound = -float(dual) if dual is not None and np.isfinite(dual) else math.inf
    if result.x is None:
        return None, upper_bound
    pattern = np.round(result.x).astype(np.int64)
    return pattern, max(upper_bound, float(pi @ pattern))


def solve_knapsack(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                   max_items: int | None, pi: np.ndarray, time_limit: float
                   ) -> tuple[np.ndarray | None, float]:
    """The pattern maximising pi . a and a proven upper bound on that maximum."""
    if not max_items or max_items >= _max_items(bins, counts, limits):
        solved = knapsack_dp(bins, counts, limits, pi)
        if solved is not None:
            return solved[0], solved[1] * (1 + 1e-12) + 1e-12  # round-off in the sums
    return knapsack_milp(bins, counts, limits, max_items, pi, time_limit)
