"""The graphs the planner is profiled and evaluated on: generated families and real graphs.

Real graphs come from `gnnforge.data.shared_datasets_dir()` through minimal readers here
(CSR npz, CSV / tab edge lists, MatrixMarket), since the profiler needs only structure;
they are skipped when the folder is absent. Every graph is made undirected and
de-duplicated, as the layers' inputs usually are.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from gnnforge.data import grid_2d, rmat, shared_datasets_dir, stochastic_block_model
from gnnforge.graph import Graph

__all__ = ["SuiteGraph", "benchmark_graphs", "profile_graph_names", "profile_graphs",
           "real_graph"]

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


def _real_sample(name: str, seed: int) -> Graph | None:
    graph = real_graph(name)
    return None if graph is None else _sampled(graph, graph.num_nodes // 3, seed)


def _profile_factories(seed: int) -> dict[str, tuple[str, Callable[[], Graph | None]]]:
    """name -> (family, builder); a builder returns None when its dataset is absent."""
    factories = {
        "rmat-s11": ("power-law", lambda: _undirected(*_coo(rmat(11, 16_000, seed=seed)),
                                                      2 ** 11)),
        "rmat-s13": ("power-law", lambda: _undirected(*_coo(rmat(13, 60_000, seed=seed)),
                                                      2 ** 13)),
        "rmat-s15": ("power-law", lambda: _undirected(*_coo(rmat(15, 160_000, seed=seed)),
                                                      2 ** 15)),
        "grid-60": ("road", lambda: grid_2d(60, 60, shuffle=True, seed=seed)),
        "grid-250": ("road", lambda: grid_2d(250, 250, shuffle=True, seed=seed)),
        "sbm-4x500": ("community", lambda: stochastic_block_model([500] * 4, 0.05, 0.002,
                                                                  seed=seed)),
        "sbm-8x1000": ("community", lambda: stochastic_block_model([1000] * 8, 0.01, 0.0005,
                                                                   seed=seed)),
    }
    for k in (8, 9, 10):
        factories[f"mycielski-{k}"] = ("dense", lambda k=k: _mycielski(k))
    for name in ("enron", "github", "rmat-s17"):
        factories[f"{name}-sub"] = (_REAL[name][0], lambda name=name: _real_sample(name, seed))
    factories["enron"] = ("social", lambda: real_graph("enron"))
    return factories


def profile_graph_names(seed: int = 0) -> list[str]:
    """Names `profile_graphs` may yield (real ones only when the datasets are present)."""
    return list(_profile_factories(seed))


def profile_graphs(seed: int = 0, names: Iterable[str] | None = None) -> Iterator[SuiteGraph]:
    """The training graphs of the cost models (disjoint from `benchmark_graphs`).

    Args:
        seed: generator and sampling seed.
        names: build only these (default: all); real graphs are skipped when the
            datasets folder is absent.

    Raises:
        ValueError: for a name that is not a profile graph.
    """
    factories = _profile_factories(seed)
    wanted = list(factories) if names is None else list(names)
    unknown = [n for n in wanted if n not in factories]
    if unknown:
        raise ValueError(f"profile_graphs: unknown names {unknown}; known: {list(factories)}")
    for name in factories:
        if name in wanted:
            family, build = factories[name]
            graph = build()
            if graph is not None:
                yield name, family, graph


def _ball(graph: Graph, num_nodes: int, seed: int) -> Graph:
    """The subgraph induced by the first `num_nodes` nodes a breadth-first search from a
    random node reaches (restarting from unreached nodes if its component is smaller):
    a contiguous region, which keeps local structure (road segments, a hub's community)
    that a uniform node sample would cut apart."""
    import scipy.sparse

    n = graph.num_nodes
    if num_nodes >= n:
        return graph
    adjacency = scipy.sparse.csr_matrix(
        (np.ones(graph.num_edges, dtype=np.int8), (graph.src.numpy(), graph.dst.numpy())),
        shape=(n, n))
    order = np.random.default_rng(seed).permutation(n)
    seen = np.zeros(n, dtype=bool)
    picked: list[np.ndarray] = []
    count, start = 0, 0
    while count < num_nodes:
        while seen[order[start]]:
            start += 1
        reached = scipy.sparse.csgraph.breadth_first_order(
            adjacency, int(order[start]), directed=False, return_predecessors=False)
        seen[reached] = True
        picked.append(reached[: num_nodes - count])
        count += len(picked[-1])
    nodes = torch.as_tensor(np.concatenate(picked), dtype=torch.int64)
    return graph.subgraph(nodes).graph


# Evaluation sizes: (E + N) x 2048 stays near 2e8, so the widest aggregation is a
# fraction of a second on one core and the whole grid fits ~20 minutes.
_BENCHMARK_REGION_NODES = {"luxembourg-osm": 10_000, "facebook": 6_000}


def benchmark_graphs(seed: int = 1, names: Iterable[str] | None = None
                     ) -> Iterator[SuiteGraph]:
    """Evaluation graphs, one per family, none of them used to train the cost models.

    Citation: Cora (whole). Road: a 10,000-node breadth-first region of luxembourg-osm.
    Social / power-law: a 6,000-node region of MUSAE Facebook, and an R-MAT scale-13
    graph (a seed the profile does not use). Dense: the Mycielski-11 graph. Without the
    datasets folder a shuffled 170x170 grid stands in for the road graph.

    Args:
        seed: generator and region seed.
        names: build only these (default: all).
    """
    wanted = None if names is None else set(names)

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    if want("cora") and (graph := real_graph("cora")) is not None:
        yield "cora", "citation", graph
    for name, family in (("luxembourg-osm", "road"), ("facebook", "social")):
        if want(name) and (graph := real_graph(name)) is not None:
            yield (f"{name}-{_BENCHMARK_REGION_NODES[name] // 1000}k", family,
                   _ball(graph, _BENCHMARK_REGION_NODES[name], seed))
    if want("rmat-s13") or want("rmat-s13-b"):
        yield "rmat-s13-b", "power-law", _undirected(*_coo(rmat(13, 60_000, seed=seed + 100)),
                                                     2 ** 13)
    if want("mycielski-11"):
        yield "mycielski-11", "dense", _mycielski(11)
    if shared_datasets_dir() is None and want("grid-170"):
        yield "grid-170", "road", grid_2d(170, 170, shuffle=True, seed=seed)


def _coo(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    return graph.src.numpy(), graph.dst.numpy()
