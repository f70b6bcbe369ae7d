"""Known answers for the reference backend on a hand-built graph (it is the oracle)."""

from __future__ import annotations

import torch

import gnnforge.ops as ops
from gnnforge.graph import Graph

# Edges 0: 0->2, 1: 1->2, 2: 2->2 (self-loop), 3: 1->2 (duplicate), 4: 0->1; node 3 isolated.
GRAPH = Graph([0, 1, 2, 1, 0], [2, 2, 2, 2, 1], 4)
X = torch.tensor([[1.0, -1.0], [2.0, 5.0], [4.0, 0.0], [9.0, 9.0]])
W = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])


def test_copy_u_reductions_known_answer():
    with ops.use_backend("reference"):
        assert torch.equal(ops.copy_u_sum(GRAPH, X),
                           torch.tensor([[0.0, 0.0], [1.0, -1.0], [9.0, 9.0], [0.0, 0.0]]))
        assert torch.equal(ops.copy_u_mean(GRAPH, X)[2], torch.tensor([9.0, 9.0]) / 4)
        assert torch.equal(ops.copy_u_max(GRAPH, X)[2], torch.tensor([4.0, 5.0]))
        assert torch.equal(ops.copy_u_min(GRAPH, X)[2], torch.tensor([1.0, -1.0]))
        assert torch.equal(ops.copy_u_max(GRAPH, X)[0], torch.zeros(2))  # no in-edges


def test_weighted_and_edge_known_answer():
    with ops.use_backend("reference"):
        out = ops.u_mul_e_sum(GRAPH, X, W)
        expected = 1 * X[0] + 2 * X[1] + 3 * X[2] + 4 * X[1]
        assert torch.equal(out[2], expected)
        assert torch.equal(ops.copy_e_sum(GRAPH, W), torch.tensor([0.0, 5.0, 10.0, 0.0]))
        assert torch.equal(ops.u_dot_v(GRAPH, X, X)[:, 0],
                           torch.tensor([4.0, 8.0, 16.0, 8.0, -3.0]))


def test_edge_softmax_known_answer():
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0, 7.0])
    with ops.use_backend("reference"):
        out = ops.edge_softmax(GRAPH, logits)
    assert torch.allclose(out[:4], torch.softmax(logits[:4], 0))
    assert out[4] == 1.0
