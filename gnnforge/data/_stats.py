"""Statistics of a graph or a collection of graphs, computed from the edges.

Every number here is measured from the data: counts, degree distributions (in, out),
self-loops, duplicate edges, isolated nodes, reciprocity and bandwidth (the largest
|src - dst| over edges, in the given node order: what RCM reordering shrinks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnnforge.data._arrays import sorted_unique
from gnnforge.graph import Graph, GraphBatch

__all__ = ["collection_stats", "degree_summary", "graph_stats", "log2_histogram"]


def log2_histogram(values: np.ndarray) -> dict[str, list]:
    """Counts in power-of-two bins: 0, 1, 2-3, 4-7, 8-15, ... up to the largest value.

    Returns {"bins": labels, "counts": counts}; the counts sum to `values.size`.
    """
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return {"bins": [], "counts": []}
    # bin 0 holds zeros; bin k >= 1 holds [2**(k-1), 2**k)
    index = np.zeros(values.size, dtype=np.int64)
    positive = values > 0
    index[positive] = np.floor(np.log2(values[positive])).astype(np.int64) + 1
    counts = np.bincount(index)
    labels = ["0"] + [
        str(1 << (k - 1)) if k == 1 else f"{1 << (k - 1)}-{(1 << k) - 1}"
        for k in range(1, counts.size)
    ]
    return {"bins": labels, "counts": counts.tolist()}


def degree_summary(degrees: np.ndarray) -> dict[str, float]:
    """min, mean, median, max, std and skewness (Fisher, biased) of a degree array."""
    if degrees.size == 0:
        return {k: 0.0 for k in ("min", "mean", "median", "max", "std", "skew")}
    values = degrees.astype(np.float64)
    mean, std = values.mean(), values.std()
    skew = float(((values - mean) ** 3).mean() / std**3) if std > 0 else 0.0
    return {
        "min": float(values.min()),
        "mean": float(mean),
        "median": float(np.median(values)),
        "max": float(values.max()),
        "std": float(std),
        "skew": skew,
    }


def _edge_stats(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> dict[str, Any]:
    loops = src == dst
    keys = sorted_unique(src * max(num_nodes, 1) + dst)
    other = ~loops
    if other.any():
        reverse = dst[other] * max(num_nodes, 1) + src[other]
        position = np.clip(np.searchsorted(keys, reverse), 0, keys.size - 1)
        reciprocity = float((keys[position] == reverse).mean())
    else:
        reciprocity = 0.0
    in_degree = np.bincount(dst, minlength=num_nodes)
    out_degree = np.bincount(src, minlength=num_nodes)
    touched = np.zeros(num_nodes, dtype=bool)
    touched[src] = True
    touched[dst] = True
    pairs = sorted_unique(
        np.minimum(src[other], dst[other]) * max(num_nodes, 1) + np.maximum(src[other], dst[other])
    )
    return {
        "num_nodes": int(num_nodes),
        "num_edges": int(src.size),
        "self_loops": int(loops.sum()),
        "duplicate_edges": int(src.size - keys.size),
        "undirected_edges": int(pairs.size),
        "reciprocity": reciprocity,
        "isolated_nodes": int(num_nodes - touched.sum()),
        "bandwidth": int(np.abs(src - dst).max()) if src.size else 0,
        "in_degree": degree_summary(in_degree),
        "out_degree": degree_summary(out_degree),
        "in_degree_histogram": log2_histogram(in_degree),
    }


def graph_stats(graph: Graph) -> dict[str, Any]:
    """Statistics of one graph.

    Returns:
        dict with num_nodes, num_edges, self_loops, duplicate_edges (edges beyond the
        first with the same (src, dst)), undirected_edges (distinct unordered non-loop
        pairs), reciprocity (share of non-loop edges whose reverse exists), isolated_nodes
        (no incident edge), bandwidth (max |src - dst|), in_degree and out_degree
        summaries (min/mean/median/max/std/skew), in_degree_histogram (`log2_histogram`).
    """
    return _edge_stats(graph.src.cpu().numpy(), graph.dst.cpu().numpy(), graph.num_nodes)


def collection_stats(graphs: Sequence[Graph] | GraphBatch) -> dict[str, Any]:
    """Statistics of many graphs: the per-graph size distribution plus `graph_stats` of
    their disjoint union (degrees, loops, duplicates; bandwidth is the max over graphs).
    """
    batch = graphs if isinstance(graphs, GraphBatch) else GraphBatch.from_graphs(list(graphs))
    nodes = np.diff(batch.graph_ptr.cpu().numpy())
    edges = np.diff(batch.edge_ptr.cpu().numpy())
    stats = graph_stats(batch)
    stats.update(
        {
            "num_graphs": int(nodes.size),
            "nodes_per_graph": degree_summary(nodes),
            "edges_per_graph": degree_summary(edges),
            "nodes_per_graph_histogram": log2_histogram(nodes),
        }
    )
    return stats
