"""`pack`: one entry point for tuple packing, its baselines and the improvement step."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gnnforge.packing._heuristics import HEURISTICS, resolve_heuristic
from gnnforge.packing._histogram import histogram_arrays
from gnnforge.packing._improve import default_budget, improve_packing
from gnnforge.packing._plan import PackingPlan, make_plan
from gnnforge.packing._refine import refine_packing
from gnnforge.packing._tuple_pack import PackWork, histogram_pack

__all__ = ["METHODS", "pack"]

# method -> (best fit?, component packed on; None = all components)
METHODS: dict[str, tuple[bool, int | None]] = {
    "lpfhp": (True, None),
    "spfhp": (False, None),
    "none": (True, None),
    "nodes_only": (True, 0),
    "edges_only": (True, 1),
}


def _check_limits(limits: Sequence[int] | int, k: int) -> np.ndarray:
    array = np.atleast_1d(np.asarray(limits))
    if array.ndim != 1 or array.size != k or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"limits: expected {k} integers (one per size component), got {limits!r}")
    if (array < 1).any():
        raise ValueError(f"limits: every limit must be >= 1, got {array.tolist()}")
    return array.astype(np.int64)


def _split_oversized(bins: np.ndarray, counts: np.ndarray, limits: np.ndarray, oversized: str
                     ) -> tuple[np.ndarray, np.ndarray, dict[tuple[int, ...], int]]:
    if oversized not in ("error", "drop"):
        raise ValueError(f"oversized: expected 'error' or 'drop', got {oversized!r}")
    too_big = (bins > limits).any(axis=1)
    if not too_big.any():
        return bins, counts, {}
    first = int(np.flatnonzero(too_big)[0])
    if oversized == "error":
        raise ValueError(
            f"{int(too_big.sum())} size bins exceed limits {limits.tolist()}, e.g. "
            f"{counts[first]} graph(s) of size {bins[first].tolist()}; raise the limits or pass "
            "oversized='drop' to leave them out (they are counted in plan.dropped)")
    dropped = {tuple(int(v) for v in bins[i]): int(counts[i]) for i in np.flatnonzero(too_big)}
    return bins[~too_big], counts[~too_big], dropped


def pack(histogram: Mapping[tuple[int, ...], int], limits: Sequence[int] | int,
         heuristic: str | Callable[[np.ndarray], np.ndarray] = "product", method: str = "lpfhp",
         max_graphs_per_pack: int | None = None, *, oversized: str = "error",
         improve: bool | float = True, refine: float = 0.0) -> PackingPlan:
    """Pack a size histogram into packs that respect every limit.

    Args:
        histogram: {size tuple (k ints, e.g. (nodes, edges)): count}, see `size_histogram`.
        limits: capacity of one pack per component (k ints).
        heuristic: 'product', 'sum', 'max', 'min', 'nodes', 'edges', a
            `weighted_heuristic(...)`, or a vectorised callable [n, k] -> [n] (checked for
            monotonicity on the grid [0, limits]).
        method: 'lpfhp' (longest-pack-first, best fit), 'spfhp' (shortest-pack-first),
            'none' (one graph per pack), 'nodes_only' / 'edges_only' (classical 1-D
            packing on one component; the other may overflow, see plan.overflow).
        max_graphs_per_pack: cap on graphs per pack (graph slots), or None.
        oversized: 'error' (default) raises on a size above a limit; 'drop' leaves such
            graphs out and counts them in plan.dropped.
        improve: run the improvement step after lpfhp/spfhp (re-pack into a pre-opened
            number of packs); plan.improved_from keeps the pack count before it (and
            before `refine`). True: under the default budget, as much work again as the
            plain run (counted, not timed, so plans are reproducible; see
            `gnnforge.packing._improve`); a number: that budget in `PackWork` units
            (float('inf'): every attempt); False or 0: skip it.
        refine: seconds for LP refinement after lpfhp/spfhp (0, the default, skips it):
            column generation on the pattern LP gives a provable bound (plan.lp,
            plan.proven_bound) and LP rounding / a restricted MILP a plan that is kept
            when it has fewer packs. Histograms above 5,000 bins are not refined.

    Returns:
        PackingPlan with packs, efficiency per component, lower bound and gap.

    Raises:
        ValueError: on bad limits, unknown method or heuristic, a non-monotone heuristic,
            or (oversized='error') a graph larger than a limit.
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if max_graphs_per_pack is not None and (int(max_graphs_per_pack) != max_graphs_per_pack
                                            or max_graphs_per_pack < 1):
        raise ValueError(f"max_graphs_per_pack: expected a positive int or None, got "
                         f"{max_graphs_per_pack!r}")
    if not isinstance(improve, bool) and (not isinstance(improve, (int, float))
                                          or not improve >= 0):
        raise ValueError(f"improve: expected True, False or a work budget >= 0, got "
                         f"{improve!r}")
    if not isinstance(refine, (int, float)) or not refine >= 0:
        raise ValueError(f"refine: expected a number of seconds >= 0, got {refine!r}")
    bins, counts = histogram_arrays(histogram)
    k = bins.shape[1] if bins.size else np.atleast_1d(np.asarray(limits)).size
    limits_array = _check_limits(limits, k)
    bins = bins.reshape(-1, k)
    name, function = resolve_heuristic(heuristic, limits_array)
    best_fit, component = METHODS[method]
    if component is not None and component >= k:
        raise ValueError(f"method {method!r} needs at least {component + 1} size components, "
                         f"got {k}")
    check = limits_array
    if component is not None:
        # Only the packed component must fit; the baseline's point is to show overflow.
        check = np.full_like(limits_array, np.iinfo(np.int64).max)
        check[component] = limits_array[component]
    bins, counts, dropped = _split_oversized(bins, counts, check, oversized)
    if method == "none":
        shapes = [((b,), int(c)) for b, c in enumerate(counts.tolist())]
        return make_plan(shapes, bins, limits_array, method, "-", max_graphs_per_pack, dropped)
    cap = int(max_graphs_per_pack) if max_graphs_per_pack else None
    columns = list(range(k))
    if component is not None:
        columns = [component]
        function, name = (lambda x: x[:, 0]), ["nodes", "edges"][component]
    work, work_limits = bins[:, columns], limits_array[columns]
    plain = PackWork()
    shapes = histogram_pack(work, counts, work_limits, function, best_fit, cap, work=plain)
    improved_from, lp = None, None
    alternatives = _alternatives(function, work_limits, work.shape[0])
    if (improve or refine) and component is None:
        improved_from = sum(c for _, c in shapes)
    if improve and component is None:
        budget = default_budget(plain.units) if improve is True else float(improve)
        shapes = improve_packing(shapes, work, counts, work_limits, alternatives, cap, budget)
    if refine and component is None:
        shapes, lp = refine_packing(shapes, work, counts, work_limits, alternatives, cap,
                                    float(refine))
    return make_plan(shapes, bins, limits_array, method, name, max_graphs_per_pack, dropped,
                     improved_from, lp)


# Histograms up to this many bins also try every built-in heuristic in the improvement
# step (a molecule histogram packs in milliseconds; 100,000 random bins take seconds).
_TRY_ALL_HEURISTICS_BELOW = 5000


def _alternatives(function: Callable[[np.ndarray], np.ndarray], limits: np.ndarray,
                  num_bins: int) -> list[Callable[[np.ndarray], np.ndarray]]:
    if num_bins > _TRY_ALL_HEURISTICS_BELOW:
        return [function]
    names = [n for n in HEURISTICS if n != "edges" or limits.size > 1]
    return [function] + [resolve_heuristic(n, limits)[1] for n in names]
