"""Layer-neighbour sampling: LABOR-0 and LABOR-* (Balin & Catalyurek, NeurIPS 2023)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnnforge.graph import Graph
from gnnforge.sampling._common import LayerwiseSampler, check_fanouts
from gnnforge.sampling._kernels import labor_importance, labor_layer

__all__ = ["LaborSampler"]


class LaborSampler(LayerwiseSampler):
    """LABOR: neighbour sampling whose seeds share their random decisions.

    Every source vertex t draws one uniform r_t per layer and minibatch; the edge t -> s
    is kept iff r_t <= min(1, c_s * pi_t). LABOR-0 uses pi = 1 and c_s = k / d_s, so each
    seed still expects k in-edges with NS's variance, but seeds sharing a neighbour share
    its decision, and far fewer distinct vertices are sampled. LABOR-* optimises pi by
    fixed-point iterations to minimise the expected number of sampled vertices under the
    same variance, and returns importance weights in `Block.edge_weight`.

    Args:
        fanouts: k per layer, input layer first (-1: every in-neighbour).
        importance_sampling: False/0 for LABOR-0; an int i > 0 runs i fixed-point
            iterations; -1 (or True) iterates until the expectation stops dropping.
    """

    def __init__(self, fanouts: Sequence[int], importance_sampling: bool | int = False) -> None:
        self.fanouts = check_fanouts("LaborSampler", fanouts)
        if importance_sampling is True:
            importance_sampling = -1
        if not isinstance(importance_sampling, int) or importance_sampling < -1:
            raise ValueError("importance_sampling must be False, True, or an int >= -1, got "
                             f"{importance_sampling!r}")
        self.importance_sampling = int(importance_sampling)

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    def layer_fn(self, graph: Graph):
        """The per-layer kernel call `(in_edges, rows, frontier, layer, key) -> picks`."""
        del graph  # everything comes from the in-edges
        fanouts = self.fanouts
        iterations = self.importance_sampling

        def layer(edges, rows, frontier, index, layer_key):
            c, pi_edge = self.probabilities(edges.rowptr, edges.col, rows, fanouts[index],
                                            iterations)
            use_pi = iterations != 0
            counts, src, eid, weight = labor_layer(
                edges.rowptr, edges.col, edges.eids, rows, c, pi_edge, use_pi,
                edges.num_nodes, layer_key.key_a, layer_key.key_b, layer_key.mix,
                layer_key.dependent)
            return counts, src, eid, weight if use_pi else None

        return layer

    @staticmethod
    def probabilities(rowptr: np.ndarray, col: np.ndarray, rows: np.ndarray, fanout: int,
                      iterations: int) -> tuple[np.ndarray, np.ndarray]:
        """(c [n], pi_edge [E]) of one layer: edge t -> s_i is kept w.p. min(1, c_i pi_t).

        `rows` are the destinations' CSR rows; pi_edge lists pi_t for their in-edges in
        order (empty for LABOR-0, where pi = 1).
        """
        if fanout < 0:
            total = int((rowptr[rows + 1] - rowptr[rows]).sum()) if iterations else 0
            return np.full(rows.size, np.inf), np.ones(total)
        if iterations == 0:
            degree = (rowptr[rows + 1] - rowptr[rows]).astype(np.float64)
            with np.errstate(divide="ignore"):
                c = np.where(degree <= fanout, np.inf, fanout / np.maximum(degree, 1))
            return c, np.ones(0)
        c, pi_edge, _ = labor_importance(rowptr, col, rows, fanout, iterations)
        return c, pi_edge

    def __repr__(self) -> str:
        return (f"LaborSampler(fanouts={self.fanouts}, "
                f"importance_sampling={self.importance_sampling})")
