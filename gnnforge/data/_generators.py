"""Seeded graph generators for controlled experiments.

All take a `seed` (or a numpy Generator) and return a `Graph`; none touches global RNG state.
"""

from __future__ import annotations

import numpy as np
import torch

from gnnforge.data._arrays import sorted_unique
from gnnforge.graph import Graph

__all__ = ["grid_2d", "random_molecule_like", "rmat", "stochastic_block_model", "uniform_random"]


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _graph(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Graph:
    return Graph._trusted(torch.from_numpy(src.astype(np.int64)),
                          torch.from_numpy(dst.astype(np.int64)), num_nodes)


def _unique_pairs(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    key = sorted_unique(src.astype(np.int64) * num_nodes + dst)
    return key // num_nodes, key % num_nodes


def rmat(scale: int, num_edges: int, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         seed: int | np.random.Generator = 0, self_loops: bool = False) -> Graph:
    """R-MAT power-law graph (Chakrabarti et al. 2004) on 2**scale nodes.

    Each edge picks one quadrant of the adjacency matrix per bit with probabilities
    (a, b, c, 1-a-b-c). Edges are drawn until exactly `num_edges` distinct directed pairs
    exist; like the benchmark graph in shared/datasets/synthetic, ids are not permuted,
    so hubs sit at low ids, and edges are sorted by (dst, src).

    Raises:
        ValueError: on probabilities outside [0, 1] or more edges than pairs.
    """
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise ValueError(f"rmat: a, b, c must be >= 0 with a+b+c <= 1, got {a}, {b}, {c}")
    num_nodes = 1 << scale
    if num_edges > num_nodes * (num_nodes - (0 if self_loops else 1)):
        raise ValueError(f"rmat: {num_edges} edges do not fit in {num_nodes} nodes")
    rng = _rng(seed)
    keys = np.zeros(0, dtype=np.int64)
    while keys.size < num_edges:
        batch = int((num_edges - keys.size) * 1.3) + 1024
        src = np.zeros(batch, dtype=np.int64)
        dst = np.zeros(batch, dtype=np.int64)
        for _ in range(scale):
            r = rng.random(batch)
            src = (src << 1) | (r >= a + b)
            dst = (dst << 1) | (((r >= a) & (r < a + b)) | (r >= a + b + c))
        if not self_loops:
            keep = src != dst
            src, dst = src[keep], dst[keep]
        keys = sorted_unique(np.concatenate([keys, dst * num_nodes + src]))
    if keys.size > num_edges:
        keys = np.sort(rng.choice(keys, num_edges, replace=False))
    dst, src = keys // num_nodes, keys % num_nodes
    return _graph(src, dst, num_nodes)


def grid_2d(rows: int, cols: int, shuffle: bool = False,
            seed: int | np.random.Generator = 0) -> Graph:
    """A rows x cols 4-neighbour grid (a road-like, low-bandwidth graph), both directions.

    Node ids are row-major unless `shuffle`, which applies a random relabelling (the
    same graph with no locality, to show what node order costs).
    """
    ids = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    horizontal = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()])
    vertical = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()])
    pairs = np.concatenate([horizontal, vertical], axis=1)
    src = np.concatenate([pairs[0], pairs[1]])
    dst = np.concatenate([pairs[1], pairs[0]])
    if shuffle:
        relabel = _rng(seed).permutation(rows * cols)
        src, dst = relabel[src], relabel[dst]
    order = np.lexsort((src, dst))
    return _graph(src[order], dst[order], rows * cols)


def uniform_random(num_nodes: int, num_edges: int, seed: int | np.random.Generator = 0) -> Graph:
    """Erdos-Renyi-like directed graph: `num_edges` endpoints drawn uniformly (duplicates kept)."""
    rng = _rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    order = np.lexsort((src, dst))
    return _graph(src[order], dst[order], num_nodes)


def stochastic_block_model(block_sizes: list[int], p_in: float, p_out: float,
                           seed: int | np.random.Generator = 0) -> Graph:
    """Undirected SBM: edge probability p_in inside a block, p_out across blocks.

    Pairs are sampled per block pair by drawing the edge count from a binomial and then
    distinct positions, so cost is proportional to the edges, not to N^2.
    """
    rng = _rng(seed)
    starts = np.concatenate([[0], np.cumsum(block_sizes)])
    num_nodes = int(starts[-1])
    chunks_src, chunks_dst = [], []
    for i, size_i in enumerate(block_sizes):
        for j in range(i, len(block_sizes)):
            size_j = block_sizes[j]
            pairs = size_i * (size_i - 1) // 2 if i == j else size_i * size_j
            count = rng.binomial(pairs, p_in if i == j else p_out) if pairs else 0
            picks = rng.choice(pairs, size=count, replace=False) if count else np.zeros(0, np.int64)
            if i == j:
                # decode index k of the strictly upper triangle in row-major order
                u = (size_i - 2 - np.floor(np.sqrt(-8 * picks + 4 * size_i * (size_i - 1) - 7) / 2 - 0.5)).astype(np.int64)
                v = picks + u + 1 - size_i * (size_i - 1) // 2 + (size_i - u) * ((size_i - u) - 1) // 2
                chunks_src.append(u + starts[i])
                chunks_dst.append(v + starts[i])
            else:
                chunks_src.append(picks // size_j + starts[i])
                chunks_dst.append(picks % size_j + starts[j])
    src = np.concatenate(chunks_src) if chunks_src else np.zeros(0, np.int64)
    dst = np.concatenate(chunks_dst) if chunks_dst else np.zeros(0, np.int64)
    both_src, both_dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    both_src, both_dst = _unique_pairs(both_src, both_dst, num_nodes)
    return _graph(both_src, both_dst, num_nodes)


def random_molecule_like(num_graphs: int, mean_atoms: float = 23.0, max_atoms: int = 60,
                         ring_fraction: float = 0.1, num_atom_types: int = 9,
                         seed: int | np.random.Generator = 0) -> list[Graph]:
    """Small sparse graphs with molecule-like size statistics: a random tree plus a few
    ring-closing bonds, both directions, with integer atom/bond type features.

    Node data `x` [n, 1] int64 atom type; edge data `edge_attr` [2m, 1] int64 bond type.
    """
    rng = _rng(seed)
    graphs = []
    for _ in range(num_graphs):
        n = int(np.clip(rng.poisson(mean_atoms), 1, max_atoms))
        parents = np.array([rng.integers(0, i) for i in range(1, n)], dtype=np.int64)
        children = np.arange(1, n, dtype=np.int64)
        extra = rng.binomial(n, ring_fraction) if n > 3 else 0
        extra_u = rng.integers(0, n, extra)
        extra_v = rng.integers(0, n, extra)
        keep = extra_u != extra_v
        u = np.concatenate([parents, extra_u[keep]])
        v = np.concatenate([children, extra_v[keep]])
        u, v = _unique_pairs(np.minimum(u, v), np.maximum(u, v), n)
        bond = rng.integers(0, 4, u.size)
        src, dst = np.concatenate([u, v]), np.concatenate([v, u])
        graphs.append(Graph._trusted(
            torch.from_numpy(src), torch.from_numpy(dst), n,
            node_data={"x": torch.from_numpy(rng.integers(0, num_atom_types, (n, 1)))},
            edge_data={"edge_attr": torch.from_numpy(np.concatenate([bond, bond])[:, None])}))
    return graphs
