"""Graph features for the cost models, computed in one cheap pass over the edges."""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["FEATURE_NAMES", "DEGREE_THRESHOLDS", "graph_features"]

DEGREE_THRESHOLDS = (4, 16, 64, 256)
FEATURE_NAMES = ("num_src_nodes", "num_dst_nodes", "num_edges", "density", "degree_mean",
                 "degree_std", "degree_max", "degree_skew",
                 *(f"frac_degree_over_{t}" for t in DEGREE_THRESHOLDS))


def graph_features(graph: Any) -> dict[str, float]:
    """Size and in-degree shape of a graph (or sampler block), from one bincount.

    Returns a dict with `FEATURE_NAMES`: node and edge counts, density E / (Nd Ns), the
    mean, standard deviation, maximum and skewness of destination in-degrees, and the
    fraction of destination rows with more than 4, 16, 64 and 256 in-edges (the rows a
    pull SpMM spends most time on). Degrees are what SENSEi's models key on; skew and
    the tail fractions separate power-law graphs from regular ones of equal mean.

    Args:
        graph: any object with num_src_nodes, num_dst_nodes and coo() (kernel protocol).

    Raises:
        TypeError: when `graph` does not follow the kernel protocol.
    """
    if not all(hasattr(graph, name) for name in ("num_src_nodes", "num_dst_nodes", "coo")):
        raise TypeError("graph_features: expected a Graph or sampler block (num_src_nodes, "
                        f"num_dst_nodes, coo()), got {type(graph).__name__}")
    num_src, num_dst = int(graph.num_src_nodes), int(graph.num_dst_nodes)
    _, dst = graph.coo()
    num_edges = int(dst.numel())
    degree = torch.bincount(dst, minlength=num_dst).to(torch.float64)
    if num_dst == 0:
        degree = torch.zeros(1, dtype=torch.float64)
    mean = float(degree.mean())
    centred = degree - mean
    variance = float((centred * centred).mean())
    std = math.sqrt(variance)
    skew = float((centred ** 3).mean()) / std ** 3 if std > 0 else 0.0
    features = {
        "num_src_nodes": float(num_src), "num_dst_nodes": float(num_dst),
        "num_edges": float(num_edges),
        "density": num_edges / max(num_src * num_dst, 1),
        "degree_mean": mean, "degree_std": std, "degree_max": float(degree.max()),
        "degree_skew": skew,
    }
    for threshold in DEGREE_THRESHOLDS:
        features[f"frac_degree_over_{threshold}"] = float((degree > threshold).to(
            torch.float64).mean())
    return features
