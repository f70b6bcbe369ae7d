"""Graph features for the cost models, computed in one cheap pass over the edges.

Planning must cost less than one layer iteration, and on a dense graph with narrow
features (Mycielski-11: 135K edges, 1.5K nodes, a ~0.6 ms layer) the pass over the edges
is most of it: on CPU one compiled loop (numba, cached on disk) counts in-degrees and
self-loops together (~0.1 ms there, where torch.bincount plus a separate comparison took
~0.16 ms); the statistics over rows then run in NumPy, whose per-call cost is a few
microseconds where a torch op costs ~10.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import torch

__all__ = ["DEGREE_THRESHOLDS", "FEATURE_NAMES", "degrees_and_loops", "graph_features"]

DEGREE_THRESHOLDS = (4, 16, 64, 256)
FEATURE_NAMES = ("num_src_nodes", "num_dst_nodes", "num_edges", "density", "degree_mean",
                 "degree_std", "degree_max", "degree_skew",
                 *(f"frac_degree_over_{t}" for t in DEGREE_THRESHOLDS))


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _degrees_and_loops(src, dst, num_dst):  # pragma: no cover (compiled)
    """In-degree of every destination and the number of edges u -> u, in one pass."""
    degree = np.zeros(num_dst, np.int64)
    loops = 0
    for e in range(dst.shape[0]):
        v = dst[e]
        degree[v] += 1
        if src[e] == v:
            loops += 1
    return degree, loops


def degrees_and_loops(graph: Any) -> tuple[np.ndarray, int]:
    """([Nd] int64 in-degrees, number of self-loops) of a graph or block."""
    src, dst = graph.coo()
    num_dst = int(graph.num_dst_nodes)
    if src.device.type == "cpu":
        return _degrees_and_loops(src.numpy(), dst.numpy(), num_dst)
    return (torch.bincount(dst, minlength=num_dst).cpu().numpy(), int((src == dst).sum()))


def graph_features(graph: Any) -> dict[str, float]:
    """Size and in-degree shape of a graph (or sampler block), from one pass over the edges.

    Returns a dict with `FEATURE_NAMES` and `num_self_loops` (not a model input; planning
    uses it to derive the features after a layer's self-loop handling): node and edge
    counts, density E / (Nd Ns), the mean, standard deviation, maximum and skewness of
    destination in-degrees, and the fraction of destination rows with more than 4, 16,
    64 and 256 in-edges (the rows a pull SpMM spends most time on). Degrees are what
    SENSEi's models key on; skew and the tail fractions separate power-law graphs from
    regular ones of equal mean.

    Args:
        graph: any object with num_src_nodes, num_dst_nodes and coo() (kernel protocol).

    Raises:
        TypeError: when `graph` does not follow the kernel protocol.
    """
    if not all(hasattr(graph, name) for name in ("num_src_nodes", "num_dst_nodes", "coo")):
        raise TypeError("graph_features: expected a Graph or sampler block (num_src_nodes, "
                        f"num_dst_nodes, coo()), got {type(graph).__name__}")
    num_src, num_dst = int(graph.num_src_nodes), int(graph.num_dst_nodes)
    degree, loops = degrees_and_loops(graph)
    num_edges = int(graph.coo()[1].numel())
    degree = degree.astype(np.float64) if num_dst > 0 else np.zeros(1)
    mean = float(degree.mean())
    centred = degree - mean
    squares = centred * centred
    std = math.sqrt(float(squares.mean()))
    skew = float(np.dot(squares, centred)) / degree.size / std ** 3 if std > 0 else 0.0
    features = {
        "num_src_nodes": float(num_src), "num_dst_nodes": float(num_dst),
        "num_edges": float(num_edges),
        "density": num_edges / max(num_src * num_dst, 1),
        "degree_mean": mean, "degree_std": std, "degree_max": float(degree.max()),
        "degree_skew": skew, "num_self_loops": float(loops),
    }
    for threshold in DEGREE_THRESHOLDS:
        features[f"frac_degree_over_{threshold}"] = float(
            np.count_nonzero(degree > threshold) / degree.size)
    return features
