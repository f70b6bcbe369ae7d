"""GatedGraphConv (PyG's layer: one weight per step) equals torch_geometric's for the same
weights, forward and every gradient, for each aggregator, with and without edge weights;
old GGNN-style calls are told where that layer went."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.nn import GatedGraphConv, GGNNConv
from .test_layers_pyg import GRAPHS, random_graph

pyg = pytest.importorskip("torch_geometric.nn")


def _pair(aggr, bias, seed=0):
    torch.manual_seed(seed)
    ours = GatedGraphConv(6, 3, aggr=aggr, bias=bias).double()
    theirs = pyg.GatedGraphConv(6, 3, aggr=aggr, bias=bias).double()
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def _grads(module, x, run):
    x = x.clone().requires_grad_(True)
    out = run(module, x)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    return out, grads


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_pyg_forward_and_backward(shape, aggr, weighted, bias):
    graph = random_graph(*shape, num_types=2)   # edge types are ignored, as in PyG
    ours, theirs = _pair(aggr, bias)
    generator = torch.Generator().manual_seed(shape[0])
    x = torch.randn(graph.num_nodes, 4, generator=generator, dtype=torch.float64)
    weight = torch.rand(graph.num_edges, generator=generator, dtype=torch.float64) + 0.5
    weight = weight if weighted else None
    index = torch.stack([graph.src, graph.dst])
    got, got_grads = _grads(ours, x, lambda m, h: m(graph, h, weight))
    want, want_grads = _grads(theirs, x, lambda m, h: m(h, index, weight))
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_graph_edge_weights_are_used():
    graph = random_graph(3, 30, 120)
    weight = torch.rand(graph.num_edges, dtype=torch.float64)
    ours, theirs = _pair("add", True)
    x = torch.randn(30, 6, dtype=torch.float64)
    weighted = Graph(graph.src, graph.dst, 30, edge_data={"edge_weight": weight})
    torch.testing.assert_close(ours(weighted, x),
                               theirs(x, torch.stack([graph.src, graph.dst]), weight))


def test_old_ggnn_calls_are_redirected():
    with pytest.raises(TypeError, match="GGNNConv"):
        GatedGraphConv(16, 4, 3)                       # (hidden, steps, num_edge_types)
    with pytest.raises(TypeError, match="GGNNConv"):
        GatedGraphConv(16, 4, num_edge_types=3)
    graph = Graph([0], [1], 2)
    with pytest.raises(TypeError, match="layer\\(graph, x\\)"):
        GatedGraphConv(4, 1)(torch.randn(2, 4), graph)
    assert GGNNConv(4, 1, 2)(torch.randn(2, 4), Graph([0], [1], 2, edge_type=[1])).shape == (2, 4)


def test_bad_inputs_name_the_problem():
    graph = Graph([0, 1], [1, 0], 2)
    with pytest.raises(ValueError, match="more than out_channels=4"):
        GatedGraphConv(4, 1)(graph, torch.randn(2, 5))
    with pytest.raises(ValueError, match=r"edge_weight must have shape \[num_edges=2\]"):
        GatedGraphConv(4, 1)(graph, torch.randn(2, 4), torch.ones(3))
    with pytest.raises(ValueError, match="aggr must be one of"):
        GatedGraphConv(4, 1, aggr="median")
