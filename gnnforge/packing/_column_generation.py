"""A provable lower bound on the number of packs: the LP of the pattern formulation.

Packing a histogram is a cutting-stock problem. A *pattern* a (a count per bin) is any
multiset of items that fits one pack: sum_i a_i s_ik <= limit_k for every component k,
sum_i a_i <= max_graphs_per_pack, 0 <= a_i <= count_i. Every plan is a choice of
patterns lambda_p >= 0 (integers) with sum_p a_ip lambda_p >= count_i, and it uses
sum_p lambda_p packs. Dropping integrality gives the Gilmore-Gomory LP; its optimum
z_LP is a lower bound on every plan, and ceil(z_LP) is at least both simple bounds
(max_k ceil(total_k / limit_k): add the constraints weighted by s_ik / limit_k; the
large-item bound: each pattern holds at most one item above half a limit).

Column generation solves it without listing the patterns: the restricted master LP over
the patterns found so far gives duals pi; pricing finds the pattern maximising pi . a (a
bounded multi-dimensional knapsack, solved exactly by `_knapsack.py`: dynamic programming
on the capacity grid, or HiGHS when the grid is large or the graph cap can bind; plus
cheap greedy columns); a pattern with pi . a > 1 improves the master. At any
iteration, if U >= max_a pi . a (the knapsack's proven upper bound), then pi / U is
dual feasible and pi . counts / U <= z_LP (Farley's bound), so a valid bound is available
whenever the time budget runs out, not only at convergence. Pricing is done at a
smoothed dual (Wentges: halfway between the best-bound dual and the current one), which
cuts the tail of slow iterations.

Cost: each iteration is one LP over the columns found so far (milliseconds for molecule
histograms) and one knapsack (milliseconds by DP on molecule limits); molecule
datasets converge in 100 to 200 iterations. It is meant for histograms of at most
`MAX_BINS` bins and runs under a time budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from gnnforge.packing._knapsack import solve_knapsack

__all__ = ["MAX_BINS", "LPBound", "column_generation", "simple_bound", "singleton_patterns"]

# Beyond this many bins the master LP and the pricing MILP are too slow to be useful
# within seconds; the bound is then not computed (refinement reports why).
MAX_BINS = 5000

_EPS = 1e-6  # below any integer step of the bound; absorbs LP round-off


@dataclass(frozen=True)
class LPBound:
    """What column generation proved about a histogram.

    Attributes:
        bound: a lower bound on the number of packs of every valid plan: the largest of
            max_k ceil(total_k / limit_k) (with the graph cap), the large-item bound and
            ceil(lp_lower).
        lp_lower: a proven lower bound on the LP optimum (Farley's bound, or the LP
            value itself at convergence).
        lp_value: the restricted master LP value at the end (>= the LP optimum).
        converged: True when ceil(lp_lower) == ceil(lp_value): the LP bound is final.
        iterations: master LP solves.
        seconds: wall time spent.
    """

    bound: int
    lp_lower: float
    lp_value: float
    converged: bool
    iterations: int
    seconds: float


@dataclass
class _Master:
    columns: np.ndarray  # [P, B] int64 patterns
    x: np.ndarray        # [P] float64 LP solution of the last master solve
    result: LPBound


def simple_bound(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                 max_items: int | None) -> int:
    """max(max_k ceil(total_k / limit_k), ceil(n / cap), large-item bound)."""
    if counts.size == 0:
        return 0
    totals = (bins * counts[:, None]).sum(axis=0)
    bound = max([1] + [-(-int(t) // int(limit)) for t, limit in zip(totals, limits)])
    if max_items:
        bound = max(bound, -(-int(counts.sum()) // max_items))
    large = 2 * bins > limits  # [B, k]
    return max(bound, max(int(counts[large[:, k]].sum()) for k in range(limits.size)))


def singleton_patterns(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                       max_items: int | None) -> np.ndarray:
    """[B, B] diagonal patterns: as many copies of one bin as fit a pack (a feasible start)."""
    copies = counts.copy()
    for k in range(limits.size):
        positive = bins[:, k] > 0
        copies[positive] = np.minimum(copies[positive], limits[k] // bins[positive, k])
    if max_items:
        copies = np.minimum(copies, max_items)
    return np.diag(copies).astype(np.int64)


def _greedy_patterns(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray, cap: int,
                     pi: np.ndarray) -> list[np.ndarray]:
    """Cheap pricing: fill a pack by dual value per (weighted) scaled size, a few weights."""
    scaled = bins / limits  # [B, k]
    k = limits.size
    weights = [np.ones(k)] + [np.eye(k)[j] for j in range(k)]
    patterns = []
    for weight in weights:
        order = np.argsort(-pi / (scaled @ weight + 1e-9), kind="stable")
        remaining, items = limits.copy(), 0
        pattern = np.zeros(counts.size, dtype=np.int64)
        for i in order.tolist():
            if pi[i] <= 1e-12 or items >= cap:
                break
            size = bins[i]
            take = min(int(counts[i]), cap - items)
            for j in range(k):
                if size[j]:
                    take = min(take, int(remaining[j] // size[j]))
            if take > 0:
                pattern[i] = take
                remaining = remaining - take * size
                items += take
        patterns.append(pattern)
    return patterns


def _solve_master(columns: np.ndarray, counts: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """min sum x s.t. columns.T x >= counts, x >= 0; returns (value, x, duals >= 0)."""
    from scipy.optimize import linprog

    result = linprog(np.ones(columns.shape[0]), A_ub=-columns.T.astype(np.float64),
                     b_ub=-counts.astype(np.float64), bounds=(0, None), method="highs")
    if result.status != 0:
        raise RuntimeError(f"column generation: master LP failed ({result.message})")
    return float(result.fun), result.x, np.maximum(-result.ineqlin.marginals, 0.0)


def column_generation(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray,
                      max_items: int | None, start: np.ndarray, time_limit: float,
                      stop_at: int | None = None) -> _Master:
    """Solve the pattern LP by column generation within `time_limit` seconds.

    Args:
        bins: [B, k] int64 sizes (each within limits), counts: [B] int64 > 0.
        limits: [k] int64; max_items: graph cap or None.
        start: [P, B] int64 feasible patterns to start from (e.g. a heuristic plan's
            packs; singletons are added so every bin is covered).
        time_limit: seconds; the bound found so far is returned when it runs out.
        stop_at: stop once the bound reaches this many packs (a plan of this size is
            known, so it is optimal).

    Returns:
        The final master (columns, LP solution) and its LPBound.
    """
    began = time.perf_counter()
    cap = int(max_items) if max_items else int(counts.sum())
    floor_bound = simple_bound(bins, counts, limits, max_items)
    columns = np.unique(np.vstack([start.reshape(-1, counts.size),
                                   singleton_patterns(bins, counts, limits, max_items)]), axis=0)
    seen = {row.tobytes() for row in columns}
    lower, center, iterations = 0.0, None, 0
    while True:
        value, x, pi = _solve_master(columns, counts)
        iterations += 1
        bound = max(floor_bound, math.ceil(lower - _EPS))
        left = time_limit - (time.perf_counter() - began)
        if bound >= math.ceil(value - _EPS) or (stop_at is not None and bound >= stop_at) \
                or left <= 0:
            break
        new = [p for p in _greedy_patterns(bins, counts, limits, cap, pi)
               if pi @ p > 1 + 1e-9 and p.tobytes() not in seen]
        if not new or iterations % 5 == 0:
            smoothed = pi if center is None else 0.5 * (center + pi)
            pattern, upper = solve_knapsack(bins, counts, limits, max_items, smoothed, left)
            if 0 < upper < math.inf:
                farley = float(smoothed @ counts) / (upper * (1 + 1e-9))
                if farley > lower:
                    lower, center = farley, smoothed
            if pattern is not None and pi @ pattern > 1 + 1e-9 and pattern.tobytes() not in seen:
                new.append(pattern)
            elif not new and smoothed is pi:
                break  # no improving pattern at the master's own duals: the LP is solved
            elif not new:
                center = None  # mispriced at the smoothed dual: price at pi next time
        for pattern in new:
            seen.add(pattern.tobytes())
        if new:
            columns = np.vstack([columns, np.array(new)])
    bound = max(floor_bound, math.ceil(lower - _EPS))
    # max_k total_k / limit_k (and n / cap) bounds the LP too (weighted row sums).
    fractional = float(((bins * counts[:, None]).sum(axis=0) / limits).max(initial=0.0))
    if max_items:
        fractional = max(fractional, float(counts.sum()) / max_items)
    return _Master(columns, x, LPBound(
        bound=int(bound), lp_lower=max(float(lower), fractional), lp_value=value,
        converged=bound >= math.ceil(value - _EPS), iterations=iterations,
        seconds=time.perf_counter() - began))
