"""A packing plan and its metrics: efficiency per component, packs, lower bound, gap."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gnnforge.packing._column_generation import LPBound

__all__ = ["PackingPlan", "lower_bound"]


def lower_bound(totals: np.ndarray, limits: np.ndarray, num_graphs: int,
                max_graphs_per_pack: int | None) -> int:
    """max_k ceil(total_k / limit_k), with graph count as one more component when capped.

    No plan can use fewer packs: each pack holds at most limit_k of component k.
    """
    bound = 1 if num_graphs else 0  # graphs of size zero still need a pack
    for total, limit in zip(totals.tolist(), limits.tolist()):
        if total:
            bound = max(bound, -(-int(total) // max(int(limit), 1)))
    if max_graphs_per_pack:
        bound = max(bound, -(-num_graphs // max_graphs_per_pack))
    return bound


@dataclass(frozen=True)
class PackingPlan:
    """The result of `pack`: pack shapes with counts and how good they are.

    Attributes:
        packs: [(list of size tuples in one pack, number of such packs)].
        limits: capacity per component (k ints).
        method, heuristic: how the plan was made.
        max_graphs_per_pack: graph-slot cap, or None.
        num_packs: total packs (sum of counts).
        num_graphs: graphs packed (dropped ones excluded).
        efficiency: per component, filled slots / (num_packs * limit_k), in [0, 1] for
            valid plans (a single-component baseline may exceed 1 on a component it
            ignores; see `overflow`).
        harmonic_efficiency: harmonic mean of `efficiency`.
        lower_bound: max_k ceil(total_k / limit_k) (graph cap included), a bound no
            plan can beat.
        gap: num_packs / lower_bound - 1 (0 means provably optimal).
        speedup: graphs / num_packs, the work saved against padding every graph to the
            limits (method 'none' uses one pack per graph).
        overflow: per component (packs over the limit, largest excess, total excess);
            all zero except for the single-component baselines.
        dropped: {size tuple: count} of graphs left out because they exceed a limit
            (only with oversized='drop').
        improved_from: packs before the improvement step, or None when it did not run.
        large_item_bound: graphs larger than half a limit in some component k; no two
            of them fit one pack, so no plan beats this either. When it exceeds
            `lower_bound` (datasets whose graphs are all close to the largest), the gap
            to `lower_bound` is not reachable; `best_gap` uses the larger bound.
        lp: what LP refinement (`pack(..., refine=seconds)`) proved, or None when it
            did not run: `lp.bound` is ceil of a lower bound on the pattern LP (column
            generation), at least both bounds above; see `LPBound`.
    """

    @property
    def lp_bound(self) -> int | None:
        """The column-generation bound on the number of packs, or None (no refinement)."""
        return self.lp.bound if self.lp is not None else None

    @property
    def proven_bound(self) -> int:
        """The strongest bound known: max(lower_bound, large_item_bound, lp_bound)."""
        return max(self.lower_bound, self.large_item_bound, self.lp_bound or 0)

    @property
    def best_gap(self) -> float:
        """num_packs / proven_bound - 1 (0 means provably optimal)."""
        bound = self.proven_bound
        return self.num_packs / bound - 1 if bound else 0.0

    packs: list[tuple[list[tuple[int, ...]], int]]
    limits: tuple[int, ...]
    method: str
    heuristic: str
    max_graphs_per_pack: int | None
    num_packs: int
    num_graphs: int
    efficiency: tuple[float, ...]
    harmonic_efficiency: float
    lower_bound: int
    gap: float
    speedup: float
    overflow: tuple[tuple[int, int, int], ...]
    dropped: dict[tuple[int, ...], int] = field(default_factory=dict)
    improved_from: int | None = None
    large_item_bound: int = 0
    lp: LPBound | None = None

    @property
    def num_dropped(self) -> int:
        return sum(self.dropped.values())

    def summary(self) -> str:
        effs = " / ".join(f"{100 * e:.2f}%" for e in self.efficiency)
        line = (f"{self.method} ({self.heuristic}): {self.num_packs} packs for "
                f"{self.num_graphs} graphs, efficiency {effs} (harmonic "
                f"{100 * self.harmonic_efficiency:.2f}%), lower bound {self.lower_bound}, "
                f"gap {100 * self.gap:.2f}%, speedup {self.speedup:.2f}x")
        if self.lp is not None:
            state = "final" if self.lp.converged else "not final within the time budget"
            line += (f"; LP bound {self.lp.bound} ({state}: {self.lp.lp_lower:.2f} <= LP <= "
                     f"{self.lp.lp_value:.2f}), gap to it {100 * self.best_gap:.2f}%")
        if any(o[0] for o in self.overflow):
            parts = [f"component {k}: {o[0]} packs over by up to {o[1]}"
                     for k, o in enumerate(self.overflow) if o[0]]
            line += "; OVERFLOW " + ", ".join(parts)
        if self.dropped:
            line += f"; dropped {self.num_dropped} oversized graphs"
        return line

    __str__ = summary


def make_plan(shapes: list[tuple[tuple[int, ...], int]], bins: np.ndarray, limits: np.ndarray,
              method: str, heuristic: str, max_graphs_per_pack: int | None,
              dropped: dict[tuple[int, ...], int], improved_from: int | None = None,
              lp: LPBound | None = None) -> PackingPlan:
    """Build a PackingPlan (with all metrics) from pack shapes given as bin indices."""
    k = limits.size
    num_packs = sum(count for _, count in shapes)
    pack_counts = np.array([count for _, count in shapes], dtype=np.int64)
    lengths = np.array([len(content) for content, _ in shapes], dtype=np.int64)
    flat = np.fromiter((i for content, _ in shapes for i in content), dtype=np.int64,
                       count=int(lengths.sum()))
    # Per-shape fill by one segmented sum instead of a Python loop over shapes.
    filled = np.zeros((len(shapes), k), dtype=np.int64)
    nonempty = lengths > 0
    if flat.size:
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
        filled[nonempty] = np.add.reduceat(bins[flat], starts, axis=0)
    totals = (filled * pack_counts[:, None]).sum(axis=0) if shapes else np.zeros(k, np.int64)
    num_graphs = int((lengths * pack_counts).sum())
    excess = np.maximum(filled - limits, 0)
    over_packs = ((excess > 0) * pack_counts[:, None]).sum(axis=0) if shapes else excess.sum(0)
    over_max = excess.max(axis=0) if shapes else np.zeros(k, np.int64)
    over_total = (excess * pack_counts[:, None]).sum(axis=0) if shapes else excess.sum(0)
    rows = list(map(tuple, bins.tolist()))  # tolist() gives Python ints
    packs = [(list(map(rows.__getitem__, content)), count) for content, count in shapes]
    slots = num_packs * limits.astype(np.float64)
    efficiency = tuple(float(t / s) if s else 0.0 for t, s in zip(totals, slots))
    harmonic = (len(efficiency) / sum(1 / e for e in efficiency)
                if efficiency and all(e > 0 for e in efficiency) else 0.0)
    bound = lower_bound(totals, limits, num_graphs, max_graphs_per_pack)
    return PackingPlan(
        packs=packs, limits=tuple(int(v) for v in limits), method=method, heuristic=heuristic,
        max_graphs_per_pack=max_graphs_per_pack, num_packs=int(num_packs),
        num_graphs=int(num_graphs), efficiency=efficiency, harmonic_efficiency=harmonic,
        lower_bound=bound, gap=(num_packs / bound - 1) if bound else 0.0,
        speedup=num_graphs / num_packs if num_packs else math.nan,
        overflow=tuple((int(a), int(b), int(c)) for a, b, c in zip(over_packs, over_max,
                                                                    over_total)),
        dropped=dict(dropped), improved_from=improved_from,
        large_item_bound=_large_item_bound(flat, np.repeat(pack_counts, lengths), bins, limits),
        lp=lp)


def _large_item_bound(flat: np.ndarray, weights: np.ndarray, bins: np.ndarray,
                      limits: np.ndarray) -> int:
    large = (2 * bins > limits).any(axis=1)
    per_bin = np.bincount(flat, weights=weights, minlength=bins.shape[0]).astype(np.int64)
    # Items large in one same component k cannot share a pack; take the best k.
    return int(max(((2 * bins[:, k] > limits[k]) * per_bin).sum() for k in range(limits.size))
               ) if large.any() else 0
