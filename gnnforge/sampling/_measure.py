"""How much a sampler samples: vertices and edges per layer, and work per epoch vs batch size.

The quantities of Figure 3 in Balin et al. ("Cooperative Minibatching in GNNs"): because
sampled neighbourhoods overlap, the number of vertices sampled per seed falls as the
batch grows, so the work of an epoch (N/B batches) is a concave, falling function of B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from gnnforge.graph import Graph
from gnnforge.sampling._labor import LaborSampler
from gnnforge.sampling._neighbor import NeighborSampler
from gnnforge.sampling._random_walk import RandomWalkSampler

SAMPLER_NAMES = ("ns", "labor0", "labor*", "rw")


def make_sampler(name: str, fanouts: Sequence[int]):
    """A sampler by short name: ns, labor0, labor* (converged LABOR-*), rw (PinSAGE walks)."""
    if name == "ns":
        return NeighborSampler(fanouts)
    if name == "labor0":
        return LaborSampler(fanouts)
    if name == "labor*":
        return LaborSampler(fanouts, importance_sampling=True)
    if name == "rw":
        return RandomWalkSampler(len(fanouts), num_neighbors=max(fanouts), walk_length=3,
                                 num_walks=max(fanouts) * 2, restart_prob=0.5)
    raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLER_NAMES)}")


@dataclass(frozen=True)
class WorkPoint:
    """Mean sampled sizes of `sampler` at `batch_size` over the measured batches.

    vertices[l] / edges[l] are the sources / edges of block l (input layer first);
    vertices_per_epoch and edges_per_epoch sum every layer over N / B batches.
    """

    graph: str
    sampler: str
    batch_size: int
    vertices: tuple[float, ...]
    edges: tuple[float, ...]
    vertices_per_epoch: float
    edges_per_epoch: float


def measure(graph: Graph, graph_name: str, sampler_name: str, fanouts: Sequence[int],
            batch_size: int, num_batches: int, seed: int = 0) -> WorkPoint:
    """Average block sizes over `num_batches` batches of uniformly drawn distinct seeds."""
    sampler = make_sampler(sampler_name, fanouts)
    generator = torch.Generator().manual_seed(seed)
    batch_size = min(batch_size, graph.num_nodes)
    vertices, edges = [], []
    for _ in range(num_batches):
        seeds = torch.randperm(graph.num_nodes, generator=generator)[:batch_size]
        blocks = sampler.sample(graph, seeds, generator)
        vertices.append([b.num_src_nodes for b in blocks])
        edges.append([b.num_edges for b in blocks])
    v, e = np.mean(vertices, axis=0), np.mean(edges, axis=0)
    batches_per_epoch = graph.num_nodes / batch_size
    return WorkPoint(graph_name, sampler_name, batch_size, tuple(v.tolist()), tuple(e.tolist()),
                     float(v.sum() * batches_per_epoch), float(e.sum() * batches_per_epoch))


def work_curve(graphs: dict[str, Graph], sampler_names: Sequence[str], fanouts: Sequence[int],
               batch_sizes: Sequence[int], num_batches: int, seed: int = 0) -> list[WorkPoint]:
    """`measure` for every graph x sampler x batch size, with a progress bar."""
    jobs = [(g, s, b) for g in graphs for s in sampler_names for b in batch_sizes]
    return [measure(graphs[g], g, s, fanouts, b, num_batches, seed)
            for g, s, b in tqdm(jobs, desc="work curve", unit="point")]


def plot_curve(points: list[WorkPoint], path: str) -> None:
    """Vertices per seed at the input layer, edges per seed, and work per epoch vs batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graphs = sorted({p.graph for p in points})
    figure, axes = plt.subplots(len(graphs), 3, figsize=(13, 3.6 * len(graphs)), squeeze=False)
    for row, graph in enumerate(graphs):
        for sampler in dict.fromkeys(p.sampler for p in points if p.graph == graph):
            mine = [p for p in points if p.graph == graph and p.sampler == sampler]
            sizes = [p.batch_size for p in mine]
            series = ([p.vertices[0] / p.batch_size for p in mine],
                      [sum(p.edges) / p.batch_size for p in mine],
                      [p.vertices_per_epoch for p in mine])
            for col, values in enumerate(series):
                axes[row, col].plot(sizes, values, "o-", label=sampler)
        titles = ("input-layer vertices per seed", "edges per seed (all layers)",
                  "sampled vertices per epoch")
        for col, title in enumerate(titles):
            axes[row, col].set_xscale("log", base=2)
            axes[row, col].set_yscale("log")
            axes[row, col].set_title(f"{graph}: {title}", fontsize=9)
            axes[row, col].set_xlabel("batch size")
            axes[row, col].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def format_table(points: list[WorkPoint]) -> str:
    """A markdown table: one row per point, sizes per layer input first."""
    lines = ["| graph | sampler | batch | vertices per layer (input first) | edges per layer | "
             "vertices/epoch | edges/epoch |", "|---|---|---:|---|---|---:|---:|"]
    for p in points:
        v = " / ".join(f"{x:,.0f}" for x in p.vertices)
        e = " / ".join(f"{x:,.0f}" for x in p.edges)
        lines.append(f"| {p.graph} | {p.sampler} | {p.batch_size} | {v} | {e} | "
                     f"{p.vertices_per_epoch:,.0f} | {p.edges_per_epoch:,.0f} |")
    return "\n".join(lines)
