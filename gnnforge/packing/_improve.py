"""The improvement step: re-run histogram packing into a pre-opened number of packs.

LPFHP and SPFHP lose most of their gap at the end of the run: once the small items are
used up, the last packs opened stay part-empty. Knowing the lower bound P* = max_k
ceil(total_k / limit_k), we open P empty packs first (P from P* upward) and run the same
histogram packing: SPFHP then spreads the big items over all P packs (worst fit, which
balances them) and the small items fill the gaps; best fit is tried too. Items that fit
nowhere still open new packs, so every attempt is a valid plan; the best plan over all
attempts and the original is kept. On small histograms (molecules: a few hundred bins,
milliseconds per run) every built-in heuristic is tried as well. Each attempt costs one
packing run, so the step is a constant factor over the plain algorithm: at most
2 x len(_TARGETS) runs, times the number of heuristics on small histograms.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gnnforge.packing._tuple_pack import Content, histogram_pack

__all__ = ["improve_packing"]

# Targets as multiples of the lower bound; the first that gives a plan at the bound ends
# the search (nothing can beat it).
_TARGETS = (1.0, 1.0025, 1.005, 1.01, 1.02, 1.04)


def _count(shapes: list[tuple[Content, int]]) -> int:
    return sum(count for _, count in shapes)


def improve_packing(shapes: list[tuple[Content, int]], bins: np.ndarray, counts: np.ndarray,
                    limits: np.ndarray, heuristics: list[Callable[[np.ndarray], np.ndarray]],
                    max_items: int | None) -> list[tuple[Content, int]]:
    """The plan with the fewest packs among `shapes` and the pre-opened re-runs.

    Args:
        shapes: the plan to improve, as (bin indices, count) pairs.
        bins, counts, limits: the packing input .
        heuristics: priorities to try (the caller's first); as for `histogram_pack`.
        max_items: as for `histogram_pack`.
    """
    totals = (bins * counts[:, None]).sum(axis=0)
    bound = int(max(-(-int(t) // int(limit)) for t, limit in zip(totals, limits)))
    if max_items:
        bound = max(bound, -(-int(counts.sum()) // max_items))
    best = shapes
    for factor in _TARGETS:
        target = int(np.ceil(bound * factor))
        if target >= _count(best):
            break
        for heuristic in heuristics:
            for best_fit in (False, True):
                trial = histogram_pack(bins, counts, limits, heuristic, best_fit, max_items,
                                       target)
                if _count(trial) < _count(best):
                    best = trial
        if _count(best) <= bound:
            break
    return best
