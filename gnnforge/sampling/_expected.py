"""Exact expected block sizes of one NS or LABOR-0 layer, given its destinations.

For destinations F (the frontier) with in-degrees d_s and fanout k, destination s keeps
each in-edge with probability p_s = min(1, k / d_s) under both samplers. A block's sources
are F itself plus every sampled in-neighbour outside F, so

    E[#sources] = |F| + sum over t in N(F) \\ F of P(t is sampled by some s in F).

* LABOR-0: t is sampled iff r_t <= max_s p_s (one shared r_t), so P = max_s p_s.
* NS (without replacement): the seeds draw independently; s with m parallel edges from t
  misses all of them with probability C(d-m, k) / C(d, k), so
  P = 1 - prod_s C(d_s - m_st, k) / C(d_s, k)  (= 1 - prod_s (1 - p_s) on simple graphs).

Both expectations are closed forms of the graph and F alone: they check the samplers
without sharing any of their code or randomness, and they show where LABOR's saving
comes from (the max over s instead of the union over s) and when it vanishes (when
most of N(F) is sampled by either sampler).
"""

from __future__ import annotations

import numpy as np

from gnnforge.graph import Graph
from gnnforge.sampling._common import csr_arrays

__all__ = ["expected_layer_sizes"]


def expected_layer_sizes(graph: Graph, frontier: np.ndarray, fanout: int
                         ) -> dict[str, tuple[float, float]]:
    """Expected (sources, edges) of one layer of NS and LABOR-0 for destinations `frontier`.

    Args:
        graph: the full graph (in-edges from `graph.csr()`).
        frontier: [n] distinct int64 destination ids.
        fanout: k >= 1, or -1 for every in-edge.

    Returns:
        {"ns": (E[sources], E[edges]), "labor0": (E[sources], E[edges])}; the sources
        include the n destinations, as `Block.num_src_nodes` does.
    """
    rowptr, col = (a.astype(np.int64) for a in csr_arrays(graph)[:2])
    frontier = np.asarray(frontier, dtype=np.int64)
    degree = rowptr[frontier + 1] - rowptr[frontier]
    k = np.where(fanout < 0, degree, np.minimum(fanout, degree))
    expected_edges = float(k.sum())  # both samplers expect min(k, d) edges per destination
    owner = np.repeat(np.arange(frontier.size), degree)
    sources = col[_gather_ranges(rowptr[frontier], degree)]
    in_frontier = np.zeros(graph.num_nodes, dtype=bool)
    in_frontier[frontier] = True
    outside = ~in_frontier[sources]
    owner, sources = owner[outside], sources[outside]
    # one row per distinct (destination, source) pair with its edge multiplicity m
    pairs, multiplicity = np.unique(owner * graph.num_nodes + sources, return_counts=True)
    s_local, t = pairs // graph.num_nodes, pairs % graph.num_nodes
    d, kk = degree[s_local].astype(np.float64), k[s_local].astype(np.float64)
    keep = np.where(d > 0, kk / np.maximum(d, 1), 0.0)  # p_s per (s, t) row
    labor = np.zeros(graph.num_nodes)
    np.maximum.at(labor, t, keep)
    log_miss = np.zeros(graph.num_nodes)
    np.add.at(log_miss, t, _log_miss_all(d, kk, multiplicity))
    touched = np.unique(t)
    ns_sources = frontier.size + float((1.0 - np.exp(log_miss[touched])).sum())
    labor_sources = frontier.size + float(labor[touched].sum())
    return {"ns": (ns_sources, expected_edges), "labor0": (labor_sources, expected_edges)}


def _gather_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges starts[i] : starts[i] + lengths[i]."""
    total = int(lengths.sum())
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total)


def _log_miss_all(d: np.ndarray, k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log C(d-m, k) / C(d, k) = sum_{i<m} log((d-k-i)/(d-i)); -inf when k > d - m."""
    out = np.zeros(d.size)
    for i in range(int(m.max()) if m.size else 0):
        active = m > i
        ratio = (d[active] - k[active] - i) / (d[active] - i)
        with np.errstate(divide="ignore"):
            out[active] += np.log(np.maximum(ratio, 0.0))
    return out
