"""The graphs the planner is profiled and evaluated on: generated families and real graphs.

Real graphs come from `gnnforge.data.shared_datasets_dir()` through minimal readers here
(CSR npz, CSV / tab edge lists, MatrixMarket), since the profiler needs only structure;
they are skipped when the folder is absent. Every graph is made undirected and
de-duplicated, as the layers' inputs usually are.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from gnnforge.data import grid_2d, rmat, shared_datasets_dir, stochastic_block_model
from gnnforge.graph import Graph

__all__ = ["SuiteGraph", "benchmark_graphs", "profile_graphs", "real_graph"]

SuiteGraph = tuple[str, str, Graph]  # (name, family, graph)


def _undirected(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Graph:
    graph = Graph(torch.as_tensor(src, dtype=torch.int64), torch.as_tensor(dst, dtype=torch.int64),
                  num_nodes)
    return graph.remove_self_loops().to_undirected()


def _mycielski(k: int) -> Graph:
    import networkx as nx  # test extra; only the profiler and benchmark need it

    graph = nx.mycielski_graph(k)
    edges = np.asarray(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
    return _undirected(edges[:, 0], edges[:, 1], graph.number_of_nodes())


def _read_edge_text(path: Path, separator: str | None, skip: int) -> tuple[np.ndarray, int]:
    with gzip.open(path, "rt") as handle:
        lines = handle.read().splitlines()[skip:]
    rows = [line for line in lines if line and not line.startswith(("#", "%"))]
    edges = np.array([line.split(separator)[:2] for line in rows], dtype=np.int64)
    return edges, int(edges.max()) + 1


def _cora(root: Path) -> Graph:
    data = np.load(root / "gnn_benchmark_npz" / "cora.npz")
    indptr, indices = data["adj_indptr"], data["adj_indices"]
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return _undirected(rows, indices, int(data["adj_shape"][0]))


def _csv(relative: str) -> Callable[[Path], Graph]:
    def load(root: Path) -> Graph:
        edges, num_nodes = _read_edge_text(root / relative, ",", skip=1)
        return _undirected(edges[:, 0], edges[:, 1], num_nodes)
    return load


def _enron(root: Path) -> Graph:
    edges, num_nodes = _read_edge_text(root / "snap_email_enron" / "email-Enron.txt.gz", None,
                                       skip=1)
    return _undirected(edges[:, 0], edges[:, 1], num_nodes)


def _matrix_market(relative: str) -> Callable[[Path], Graph]:
    def load(root: Path) -> Graph:
        import scipy.io

        with gzip.open(root / relative, "rb") as handle:
            matrix = scipy.io.mmread(handle).tocoo()
        return _undirected(matrix.row, matrix.col, matrix.shape[0])
    return load


def _rmat_s17(root: Path) -> Graph:
    data = np.load(root / "synthetic" / "rmat_s17_e21.npz")
    return _undirected(data["src"], data["dst"], int(data["num_nodes"]))


_REAL = {
    "cora": ("citation", _cora),
    "facebook": ("social", _csv("musae_facebook/facebook_edges.csv.gz")),
    "github": ("power-law", _csv("musae_github/git_edges.csv.gz")),
    "enron": ("social", _enron),
    "luxembourg-osm": ("road", _matrix_market("suitesparse_luxembourg_osm/luxembourg_osm.mtx.gz")),
    "rmat-s17": ("power-law", _rmat_s17),
}


def real_graph(name: str) -> Graph | None:
    """One of the real graphs by name, or None when the datasets folder is absent."""
    if name not in _REAL:
        raise ValueError(f"real_graph: unknown name {name!r}; known: {sorted(_REAL)}")
    root = shared_datasets_dir()
    return None if root is None else _REAL[name][1](Path(root))


def _sampled(graph: Graph, num_nodes: int, seed: int) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    nodes = torch.randperm(graph.num_nodes, generator=generator)[:num_nodes]
    return graph.subgraph(nodes).graph


def profile_graphs(seed: int = 0) -> Iterator[SuiteGraph]:
    """The training graphs of the cost models (disjoint from `benchmark_graphs`)."""
    yield "rmat-s11", "power-law", _undirected(*_coo(rmat(11, 16_000, seed=seed)), 2 ** 11)
    yield "rmat-s13", "power-law", _undirected(*_coo(rmat(13, 60_000, seed=seed)), 2 ** 13)
    yield "rmat-s15", "power-law", _undirected(*_coo(rmat(15, 160_000, seed=seed)), 2 ** 15)
    yield "grid-60", "road", grid_2d(60, 60, shuffle=True, seed=seed)
    yield "grid-250", "road", grid_2d(250, 250, shuffle=True, seed=seed)
    yield "sbm-4x500", "community", stochastic_block_model([500] * 4, 0.05, 0.002, seed=seed)
    yield "sbm-8x1000", "community", stochastic_block_model([1000] * 8, 0.01, 0.0005, seed=seed)
    for k in (8, 9, 10):
        yield f"mycielski-{k}", "dense", _mycielski(k)
    for name in ("enron", "github", "rmat-s17"):
        graph = real_graph(name)
        if graph is not None:
            yield f"{name}-sub", _REAL[name][0], _sampled(graph, graph.num_nodes // 3, seed)
    enron = real_graph("enron")
    if enron is not None:
        yield "enron", "social", enron


def benchmark_graphs(seed: int = 1) -> Iterator[SuiteGraph]:
    """Evaluation graphs: one per family, none of them used to train the cost models."""
    yield "rmat-s14", "power-law", _undirected(*_coo(rmat(14, 150_000, seed=seed + 100)), 2 ** 14)
    yield "mycielski-11", "dense", _mycielski(11)
    for name, family in (("cora", "citation"), ("luxembourg-osm", "road"),
                         ("facebook", "social")):
        graph = real_graph(name)
        if graph is not None:
            yield name, family, graph
    if shared_datasets_dir() is None:
        yield "grid-300", "road", grid_2d(300, 300, shuffle=True, seed=seed)


def _coo(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    return graph.src.numpy(), graph.dst.numpy()
