"""LP refinement: turn the column-generation LP into a plan with fewer packs.

After the heuristic plan (LPFHP/SPFHP and the improvement step), `refine_packing` takes
a short look at the LP (10% of the budget; it often proves the plan optimal at once),
then repacks the emptiest packs by local search (`_local_search.py`, up to half of the
budget), then runs column generation (`_column_generation.py`) from the plan's own pack
shapes, builds integer plans from the LP, and keeps the best of:

- the plan so far (so refinement never adds packs);
- floor rounding: floor(lambda_p) packs of every pattern, the items left over packed by
  histogram packing with the improvement step (the classic residual heuristic for
  cutting stock; the residual is small, so this is within a few packs of the LP);
- the restricted master MILP: integer lambda over the patterns found, solved by HiGHS
  within half of what is left of the time budget;

and, when that is still above the bound, gives the rest of the budget to the local
search again. Every stage stops as soon as a plan meets the proven bound.

LP patterns may cover a bin more often than it has items (the LP constraint is >=);
`patterns_to_shapes` drops the surplus items, which keeps every pack within its limits
and places every graph exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from gnnforge.packing._column_generation import MAX_BINS, LPBound, column_generation, simple_bound
from gnnforge.packing._improve import improve_packing
from gnnforge.packing._local_search import remove_packs
from gnnforge.packing._tuple_pack import Content, histogram_pack

__all__ = ["patterns_to_shapes", "refine_packing", "shapes_to_patterns"]


def _count(shapes: list[tuple[Content, int]]) -> int:
    return sum(count for _, count in shapes)


def shapes_to_patterns(shapes: list[tuple[Content, int]], num_bins: int) -> np.ndarray:
    """[P, B] int64 item counts per bin of each pack shape."""
    patterns = np.zeros((len(shapes), num_bins), dtype=np.int64)
    for row, (content, _) in enumerate(shapes):
        np.add.at(patterns[row], np.asarray(content, dtype=np.int64), 1)
    return patterns


def patterns_to_shapes(patterns: np.ndarray, multiplicity: np.ndarray, counts: np.ndarray
                       ) -> tuple[list[tuple[Content, int]], np.ndarray]:
    """Use `multiplicity[p]` packs of pattern p, never more items of a bin than it has.

    Returns (shapes, items of each bin still unplaced). A pack whose pattern asks for more
    items than are left takes what is left of those bins (a sub-pattern fits too).
    """
    remaining = counts.astype(np.int64).copy()
    merged: dict[Content, int] = {}
    bins_range = np.arange(counts.size)
    for p in np.flatnonzero(multiplicity > 0).tolist():
        pattern, copies = patterns[p], int(multiplicity[p])
        used = pattern > 0
        full = min(copies, int((remaining[used] // pattern[used]).min())) if used.any() else 0
        if full:
            content = tuple(np.repeat(bins_range, pattern).tolist())
            merged[content] = merged.get(content, 0) + full
            remaining -= full * pattern
        for _ in range(copies - full):
            part = np.minimum(pattern, remaining)
            if not part.any():
                break
            content = tuple(np.repeat(bins_range, part).tolist())
            merged[content] = merged.get(content, 0) + 1
            remaining -= part
    return list(merged.items()), remaining


def _complete(shapes: list[tuple[Content, int]], remaining: np.ndarray, bins: np.ndarray,
              limits: np.ndarray, heuristics: list[Callable[[np.ndarray], np.ndarray]],
              max_items: int | None) -> list[tuple[Content, int]]:
    """Add packs for the unplaced items (histogram packing + improvement step)."""
    left = np.flatnonzero(remaining > 0)
    if left.size == 0:
        return shapes
    sub_bins, sub_counts = bins[left], remaining[left]
    rest = histogram_pack(sub_bins, sub_counts, limits, heuristics[0], True, max_items)
    rest = improve_packing(rest, sub_bins, sub_counts, limits, heuristics, max_items)
    return shapes + [(tuple(int(left[i]) for i in content), count) for content, count in rest]


def _restricted_milp(patterns: np.ndarray, counts: np.ndarray, time_limit: float,
                     incumbent: int) -> np.ndarray | None:
    """Integer pattern counts covering every bin, fewest packs (HiGHS, time-limited)."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # slow to import: only here

    if time_limit <= 0.05:
        return None
    result = milp(np.ones(patterns.shape[0]),
                  constraints=[LinearConstraint(patterns.T.astype(np.float64),
                                                counts.astype(np.float64), np.inf),
                               LinearConstraint(np.ones((1, patterns.shape[0])), 0,
                                                incumbent - 1)],
                  integrality=np.ones(patterns.shape[0]), bounds=Bounds(0, np.inf),
                  options={"time_limit": time_limit})
    if result.x is None:
        return None
    return np.round(result.x).astype(np.int64)


def refine_packing(shapes: list[tuple[Content, int]], bins: np.ndarray, counts: np.ndarray,
                   limits: np.ndarray, heuristics: list[Callable[[np.ndarray], np.ndarray]],
                   max_items: int | None, time_limit: float
                   ) -> tuple[list[tuple[Content, int]], LPBound | None]:
    """The best of `shapes` and the LP-based plans, and the proven bound.

    Args:
        shapes: a valid plan as (bin indices, count) pairs.
        bins, counts, limits, max_items: the packing input (as for `histogram_pack`).
        heuristics: priorities for packing the leftover items (the caller's first).
        time_limit: seconds for the whole refinement (LP, local search, MILP); each
            stage checks the clock, so the overrun is at most one LP solve or step.

    Returns:
        (shapes with at most as many packs as the input, LPBound or None when the
        histogram has more than MAX_BINS bins).
    """
    began = time.perf_counter()
    best = shapes
    if counts.size == 0 or counts.size > MAX_BINS:
        return best, None
    floor = simple_bound(bins, counts, limits, max_items)
    if _count(best) <= floor:
        return best, LPBound(floor, float(floor), float(floor), True, 0,
                             time.perf_counter() - began)
    # A short LP look first: it often proves the plan optimal at once (ZINC, MOSES).
    master = column_generation(bins, counts, limits, max_items,
                               shapes_to_patterns(best, counts.size), 0.1 * time_limit,
                               stop_at=_count(best))
    if master.result.bound < _count(best):  # then repack the emptiest packs
        best = remove_packs(best, bins, limits, max_items, master.result.bound,
                            0.5 * time_limit)
    iterations = master.result.iterations
    if master.result.bound < _count(best):
        master = column_generation(bins, counts, limits, max_items,
                                   np.vstack([master.columns,
                                              shapes_to_patterns(best, counts.size)]),
                                   0.8 * time_limit - (time.perf_counter() - began),
                                   stop_at=_count(best))
        iterations += master.result.iterations
    if _count(best) > master.result.bound:
        floor_rounded = np.floor(master.x + 1e-9).astype(np.int64)
        placed, remaining = patterns_to_shapes(master.columns, floor_rounded, counts)
        trial = _complete(placed, remaining, bins, limits, heuristics, max_items)
        if _count(trial) < _count(best):
            best = trial
    left = time_limit - (time.perf_counter() - began)
    if _count(best) > master.result.bound:
        integral = _restricted_milp(master.columns, counts, 0.5 * left, _count(best))
        if integral is not None:
            placed, remaining = patterns_to_shapes(master.columns, integral, counts)
            trial = _complete(placed, remaining, bins, limits, heuristics, max_items)
            if _count(trial) < _count(best):
                best = trial
    left = time_limit - (time.perf_counter() - began)
    if _count(best) > master.result.bound and left > 0:
        best = remove_packs(best, bins, limits, max_items, master.result.bound, left, seed=1)
    result = master.result
    # A plan at the bound makes the bound final whether or not the LP was solved.
    return best, LPBound(result.bound, result.lp_lower, result.lp_value,
                         result.converged or _count(best) <= result.bound,
                         iterations, time.perf_counter() - began)
