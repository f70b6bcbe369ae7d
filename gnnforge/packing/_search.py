"""Limit search: pack a histogram over a grid of (nodes, edges) limits.

Small limits mean small static shapes (less memory, more steps); large ones let more
graphs share a pack. The search runs `pack` at every grid point from small to large,
returns the Pareto front (no other point has limits <= in both components and a higher
harmonic-mean efficiency) and the smallest limits reaching a target efficiency, and can
draw the harmonic-mean efficiency heatmap (the paper's Figure 5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack

__all__ = ["DEFAULT_GRAPHS_PER_PACK", "LimitSearch", "default_limits", "search_limits"]

DEFAULT_GRAPHS_PER_PACK = 32  # a common minibatch size, when the caller names none
# Limits tried around graphs_per_pack x the mean size: below it packs fill on size before
# the graph cap, above it the cap stops them first; the search keeps the most efficient.
_DEFAULT_FACTORS = (0.8, 0.9, 1.0, 1.1, 1.25)


@dataclass(frozen=True)
class LimitSearch:
    """Result of `search_limits`.

    Attributes:
        node_limits: [Nn] candidate node limits; edge_limits: [Ne].
        efficiency: [Nn, Ne, 2] node and edge efficiency at each grid point.
        harmonic: [Nn, Ne] harmonic mean of the two.
        num_packs: [Nn, Ne].
        pareto: [(nodes, edges, node eff, edge eff, harmonic)] on the Pareto front, by
            ascending node limit.
        best: smallest (nodes * edges) limits whose efficiency reaches the target, as
            (nodes, edges, node eff, edge eff, harmonic), or None.
    """

    node_limits: np.ndarray
    edge_limits: np.ndarray
    efficiency: np.ndarray
    harmonic: np.ndarray
    num_packs: np.ndarray
    pareto: list[tuple[int, int, float, float, float]]
    best: tuple[int, int, float, float, float] | None

    def plot(self, path: str | Path) -> None:
        """Save the harmonic-efficiency heatmap (matplotlib, Agg backend) to `path`."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 5.5))
        image = axis.imshow(100 * self.harmonic, origin="lower", aspect="auto", cmap="viridis",
                            vmin=max(0.0, 100 * float(np.nanmin(self.harmonic)) - 1), vmax=100)
        axis.set_xticks(range(self.edge_limits.size), [str(v) for v in self.edge_limits],
                        rotation=60)
        axis.set_yticks(range(self.node_limits.size), [str(v) for v in self.node_limits])
        axis.set_xlabel("edge limit per pack")
        axis.set_ylabel("node limit per pack")
        axis.set_title("harmonic mean of node and edge efficiency (%)")
        figure.colorbar(image, ax=axis)
        for n, e, *_ in self.pareto:
            axis.plot(list(self.edge_limits).index(e), list(self.node_limits).index(n), "r.")
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)


def _pareto(points: list[tuple[int, int, float, float, float]]
            ) -> list[tuple[int, int, float, float, float]]:
    front = []
    for p in points:
        dominated = any(q[0] <= p[0] and q[1] <= p[1] and q[4] >= p[4]
                        and (q[0], q[1], q[4]) != (p[0], p[1], p[4]) for q in points)
        if not dominated:
            front.append(p)
    return sorted(front)


def search_limits(histogram: Mapping[tuple[int, ...], int], node_limits: Sequence[int],
                  edge_limits: Sequence[int], *,
                  heuristic: str | Callable[[np.ndarray], np.ndarray] = "product",
                  method: str = "lpfhp", max_graphs_per_pack: int | None = None,
                  target: float | None = None, per_component: bool = False,
                  improve: bool = False) -> LimitSearch:
    """Pack `histogram` at every (nodes, edges) limit pair of the grid.

    Args:
        histogram: {(nodes, edges): count}.
        node_limits, edge_limits: candidate limits, each at least the largest graph's
            size in that component (smaller ones would have to drop graphs).
        target: efficiency to reach; `best` is the smallest-area limits reaching it.
        per_component: the target applies to both components instead of the harmonic mean.
        improve: run the improvement step at every point (slower).

    Raises:
        ValueError: on an empty grid or a candidate below the largest graph.
    """
    nodes = np.unique(np.asarray(node_limits, dtype=np.int64))
    edges = np.unique(np.asarray(edge_limits, dtype=np.int64))
    if nodes.size == 0 or edges.size == 0:
        raise ValueError("search_limits: node_limits and edge_limits must not be empty")
    sizes = np.array(list(histogram), dtype=np.int64).reshape(-1, 2)
    largest = sizes.max(axis=0) if sizes.size else np.zeros(2, np.int64)
    if nodes[0] < largest[0] or edges[0] < largest[1]:
        raise ValueError(f"search_limits: candidates start at ({nodes[0]}, {edges[0]}) but the "
                         f"largest graph needs {largest.tolist()}; start the grid there")
    efficiency = np.zeros((nodes.size, edges.size, 2))
    num_packs = np.zeros((nodes.size, edges.size), dtype=np.int64)
    points = []
    for i, n in enumerate(nodes.tolist()):
        for j, e in enumerate(edges.tolist()):
            plan = pack(histogram, (n, e), heuristic, method, max_graphs_per_pack,
                        improve=improve)
            efficiency[i, j] = plan.efficiency
            num_packs[i, j] = plan.num_packs
            points.append((n, e, *plan.efficiency, plan.harmonic_efficiency))
    harmonic = 2 / (1 / np.maximum(efficiency[..., 0], 1e-12)
                    + 1 / np.maximum(efficiency[..., 1], 1e-12))
    best = None
    if target is not None:
        reached = [p for p in points
                   if (min(p[2], p[3]) if per_component else p[4]) >= target]
        best = min(reached, key=lambda p: (p[0] * p[1], p[0])) if reached else None
    return LimitSearch(nodes, edges, efficiency, harmonic, num_packs, _pareto(points), best)


def default_limits(sizes: np.ndarray, graphs_per_pack: int, *,
                   heuristic: str | Callable[[np.ndarray], np.ndarray] = "product",
                   method: str = "lpfhp") -> np.ndarray:
    """(nodes, edges) limits for packs of about `graphs_per_pack` graphs, from the data.

    Limits at the largest graph make packs of one or two graphs when most graphs are
    small (150 MUTAG graphs made 114 packs with a cap of 32). Instead: search the grid
    `factor x graphs_per_pack x mean size` (factors 0.8 ... 1.25 in each component, never
    below the largest graph) with the cap `graphs_per_pack`, and keep the limits with the
    best harmonic-mean efficiency (ties: the smaller pack).

    Args:
        sizes: [n, 2] int (nodes, edges) per graph, n >= 1.
        graphs_per_pack: the intended number of graphs per pack (>= 1).

    Raises:
        ValueError: on empty sizes or graphs_per_pack < 1.
    """
    if sizes.shape[0] == 0:
        raise ValueError("default_limits: no graphs")
    if graphs_per_pack < 1:
        raise ValueError(f"default_limits: graphs_per_pack must be >= 1, got {graphs_per_pack}")
    largest = sizes.max(axis=0)
    target = graphs_per_pack * sizes.mean(axis=0)
    grids = [np.maximum(largest[k], np.ceil(target[k] * np.array(_DEFAULT_FACTORS)))
             .astype(np.int64) for k in range(2)]
    search = search_limits(size_histogram(sizes), grids[0], grids[1], heuristic=heuristic,
                           method=method, max_graphs_per_pack=graphs_per_pack)
    points = [(round(float(search.harmonic[i, j]), 6), -int(n) * int(e), int(n), int(e))
              for i, n in enumerate(search.node_limits) for j, e in enumerate(search.edge_limits)]
    _, _, nodes, edges = max(points)
    return np.array([nodes, edges], dtype=np.int64)
