"""Every enumerated composition of every planned layer computes the default order's values
and gradients, on random graphs (hypothesis) including graphs without edges or nodes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GCNConv, GINConv, SAGEConv
from gnnforge.plan import enumerate_compositions

LAYERS = {
    "gcn": lambda: GCNConv(5, 3),
    "gat": lambda: GATConv(5, 3, heads=2),
    "sage-mean": lambda: SAGEConv(5, 3),
    "sage-sum": lambda: SAGEConv(5, 7, aggr="sum"),
    "sage-mean-noroot": lambda: SAGEConv(5, 3, root_weight=False, bias=False),
    "gin-mlp": lambda: GINConv(torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU(),
                                                   torch.nn.Linear(3, 3)), train_eps=True),
    "gin-linear-nobias": lambda: GINConv(torch.nn.Linear(5, 8, bias=False), eps=0.3),
}


@st.composite
def graphs(draw):
    nodes = draw(st.integers(0, 12))
    edges = draw(st.integers(0, 40)) if nodes else 0
    ends = st.lists(st.integers(0, max(nodes - 1, 0)), min_size=edges, max_size=edges)
    return Graph(torch.tensor(draw(ends), dtype=torch.long),
                 torch.tensor(draw(ends), dtype=torch.long), nodes)


def value_and_grads(layer, graph, x, *extra):
    """The layer's output and every gradient (input, parameters) of a fixed weighting."""
    x = x.clone().requires_grad_(True)
    out = layer(graph, x, *extra)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    return [out.detach(), *grads]


@pytest.mark.parametrize("name", sorted(LAYERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), seed=st.integers(0, 2**16))
def test_every_composition_equals_the_default_order(name, graph, seed):
    torch.manual_seed(seed)
    layer = LAYERS[name]().double()
    x = torch.randn(graph.num_nodes, 5, dtype=torch.float64)
    layer.plan = "default"
    want = value_and_grads(layer, graph, x)
    for composition in enumerate_compositions(layer.plan_expression()):
        layer.plan = composition
        for got, expected in zip(value_and_grads(layer, graph, x), want, strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)
