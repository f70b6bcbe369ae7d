"""Vertex partitions: balance constraints on nodes, in-edges and training seeds."""

import numpy as np
import pytest
import torch

from gnnforge.data import rmat
from gnnforge.distributed import balance, edge_cut, partition_nodes, rebalance
from gnnforge.distributed._partition import vertex_weights


def _graph_and_train():
    graph = rmat(11, 20000, seed=2).to_undirected()
    train = torch.from_numpy(np.random.default_rng(0).random(graph.num_nodes) < 0.2)
    return graph, train


def test_metis_balances_nodes_edges_and_seeds():
    pytest.importorskip("pymetis")
    graph, train = _graph_and_train()
    weights = vertex_weights(graph, train)
    owner = partition_nodes(graph, 4, "metis", seed=0, train_mask=train, tolerance=0.05)
    achieved = balance(owner, weights, 4)
    assert set(achieved) == {"nodes", "edges", "train"}
    assert achieved["nodes"] <= 1.05 + 1e-9 and achieved["edges"] <= 1.1
    assert edge_cut(graph, owner) < edge_cut(graph, partition_nodes(graph, 4, "random"))
    again = partition_nodes(graph, 4, "metis", seed=0, train_mask=train, tolerance=0.05)
    assert torch.equal(owner, again)  # deterministic for a seed


def test_rebalance_reaches_the_bound_on_a_skewed_start():
    graph, train = _graph_and_train()
    weights = vertex_weights(graph, train)
    start = np.zeros(graph.num_nodes, dtype=np.int64)
    start[: graph.num_nodes // 10] = 1  # part 0 holds 90% of everything
    src, dst = graph.src.numpy(), graph.dst.numpy()
    owner = rebalance(start, weights, src, dst, 2, tolerance=0.1)
    assert balance(owner, weights, 2)["nodes"] <= 1.1 + 1e-9
    assert np.array_equal(start[: graph.num_nodes // 10], np.ones(graph.num_nodes // 10))  # input kept


def test_bad_train_mask_is_named():
    graph, _ = _graph_and_train()
    with pytest.raises(ValueError, match="train_mask"):
        partition_nodes(graph, 2, "metis", train_mask=torch.ones(3, dtype=torch.bool))
