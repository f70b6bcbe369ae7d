"""Sums of projections accumulate into one GEMM output (`_fused_sums`): every plan of
SAGE, GIN and GCN equals its node-by-node evaluation in value and gradients, on the
degenerate graphs and a block; the fused path really replaces the adds; a projection
used twice, autocast and mixed dtypes keep the node-by-node sum."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnnforge.nn import GCNConv, GINConv, SAGEConv
from gnnforge.plan import _execute, enumerate_compositions
from gnnforge.plan._fused_sums import sum_terms
from gnnforge.plan._ir import add, leaf, matmul, render

from ..nn.planned_graphs import random_block, random_graphs


def _layers():
    torch.manual_seed(0)
    return {
        "sage-mean": SAGEConv(6, 4, aggr="mean"),
        "sage-sum": SAGEConv(6, 4, aggr="sum"),
        "sage-no-bias": SAGEConv(6, 4, bias=False),
        "gin": GINConv(torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()),
                       train_eps=True),
        "gcn": GCNConv(6, 4),
    }


def _value_and_grads(layer, graph, x):
    x = x.clone().requires_grad_(True)
    out = layer(graph, x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in layer.parameters() if p.grad is not None]
    layer.zero_grad()
    return [out.detach(), *grads]


def _unfused(monkeypatch):
    monkeypatch.setattr(_execute._Evaluator, "_fused_sum", lambda self, node: None)


def _cases():
    graphs = [(name, graph, graph.num_nodes) for name, graph in random_graphs()]
    block = random_block()
    return graphs + [("block", block, block.num_src_nodes)]


@pytest.mark.parametrize("name", list(_layers()))
def test_every_plan_equals_the_node_by_node_sum(monkeypatch, name):
    for graph_name, graph, rows in _cases():
        if name == "gcn" and graph_name == "block":
            continue  # GCN's Â needs a square graph
        layer = _layers()[name].double()
        x = torch.randn(rows, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        for composition in enumerate_compositions(layer.plan_expression()):
            layer.plan = composition
            with monkeypatch.context() as patch:
                _unfused(patch)
                want = _value_and_grads(layer, graph, x)
            got = _value_and_grads(layer, graph, x)
            label = f"{name} {graph_name} {render(composition.tree)}"
            assert len(got) == len(want), label
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12, msg=label)


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def test_sage_aggregate_first_runs_as_addmm_without_an_add():
    layer = SAGEConv(6, 4)
    layer.plan = enumerate_compositions(layer.plan_expression())[0]   # (M X) Wl + b + X Wr
    assert "(M @ X) @ Wl" in render(layer.plan.tree)
    graph = random_graphs()[0][1]
    x = torch.randn(graph.num_nodes, 6)
    with torch.no_grad():
        layer(graph, x)                 # the first call prepares the graph (degrees: adds)
        with _Ops() as ops:
            layer(graph, x)
    assert "add" not in ops.names and "mm" not in ops.names
    assert ops.names.count("addmm") == 1 and ops.names.count("addmm_") == 1


def test_a_projection_used_twice_is_not_fused():
    x = leaf("X", "dense", (1, "Ns", "I"))
    product = matmul(x, leaf("W", "weight", (1, "I", "O")))
    other = matmul(x, leaf("V", "weight", (1, "I", "O")))
    tree = add(product, other, product)
    terms = sum_terms(tree, tree)
    assert terms is not None
    assert terms.products == (other,) and terms.others == (product, product)
    assert sum_terms(add(product, product), add(product, product)) is None


def test_autocast_and_mixed_dtypes_keep_the_node_by_node_sum(monkeypatch):
    layer = SAGEConv(6, 4)
    layer.plan = enumerate_compositions(layer.plan_expression())[0]
    graph = random_graphs()[0][1]
    x = torch.randn(graph.num_nodes, 6)
    calls: list[object] = []
    fused = _execute._Evaluator._fused_sum

    def spy(self, node):
        calls.append(result := fused(self, node))
        return result
    monkeypatch.setattr(_execute._Evaluator, "_fused_sum", spy)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(graph, x)
    assert calls and all(c is None for c in calls)
    with monkeypatch.context() as patch, torch.autocast("cpu", dtype=torch.bfloat16):
        _unfused(patch)
        torch.testing.assert_close(out, layer(graph, x), rtol=0, atol=0)
    calls.clear()
    layer.lin_r.weight.data = layer.lin_r.weight.data.double()  # a stray float64 weight
    with pytest.raises(RuntimeError, match="same dtype"):
        layer(graph, x)           # the node-by-node path's own error, not a fused variant's
    assert calls[0] is None       # the whole sum mixes dtypes: not fused
