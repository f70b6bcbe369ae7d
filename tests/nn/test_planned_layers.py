"""GCN, SGC, TAGCN, GAT, GATv2: equal to PyG with the same weights, and every enumerated
composition equal to the default plan, forward and backward, on graphs and blocks."""

from __future__ import annotations

import pytest
import torch

from gnnforge.nn import GATConv, GATv2Conv, GCNConv, SAGEConv, SGConv, TAGConv
from gnnforge.plan import candidates, enumerate_compositions
from .planned_graphs import random_block, random_graphs

pyg = pytest.importorskip("torch_geometric.nn")



@pytest.fixture(autouse=True)
def _float64_single_thread():
    # float64: equality to 1e-10 without float32 noise. One thread: tiny GEMMs on a loaded
    # 2-core machine spend most of their time waking a thread pool.
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


def _pairs():
    return [
        ("gcn", lambda: GCNConv(6, 4), lambda: pyg.GCNConv(6, 4)),
        ("gcn-nobias-noloops", lambda: GCNConv(6, 4, add_self_loops=False, bias=False),
         lambda: pyg.GCNConv(6, 4, add_self_loops=False, bias=False)),
        ("sgc-k2", lambda: SGConv(6, 4, K=2), lambda: pyg.SGConv(6, 4, K=2)),
        ("sgc-k3", lambda: SGConv(6, 9, K=3), lambda: pyg.SGConv(6, 9, K=3)),
        ("tag-k2", lambda: TAGConv(6, 4, K=2), lambda: pyg.TAGConv(6, 4, K=2)),
        ("tag-k3", lambda: TAGConv(6, 4, K=3), lambda: pyg.TAGConv(6, 4, K=3)),
        ("tag-k1", lambda: TAGConv(6, 4, K=1, bias=False),
         lambda: pyg.TAGConv(6, 4, K=1, bias=False)),
        ("gat-h3", lambda: GATConv(6, 4, heads=3), lambda: pyg.GATConv(6, 4, heads=3)),
        ("gat-mean", lambda: GATConv(6, 4, heads=2, concat=False, negative_slope=0.1),
         lambda: pyg.GATConv(6, 4, heads=2, concat=False, negative_slope=0.1)),
        ("gatv2-h2", lambda: GATv2Conv(6, 4, heads=2), lambda: pyg.GATv2Conv(6, 4, heads=2)),
        ("gatv2-shared", lambda: GATv2Conv(6, 4, heads=2, share_weights=True),
         lambda: pyg.GATv2Conv(6, 4, heads=2, share_weights=True)),
        ("gatv2-nobias", lambda: GATv2Conv(6, 4, bias=False),
         lambda: pyg.GATv2Conv(6, 4, bias=False)),
        ("sage-mean", lambda: SAGEConv(6, 4), lambda: pyg.SAGEConv(6, 4)),
        ("sage-sum-wide", lambda: SAGEConv(6, 9, aggr="sum"),
         lambda: pyg.SAGEConv(6, 9, aggr="sum")),
        ("sage-noroot-nobias", lambda: SAGEConv(6, 4, root_weight=False, bias=False),
         lambda: pyg.SAGEConv(6, 4, root_weight=False, bias=False)),
    ]


def _randomised(ours, theirs):
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.uniform_(-1, 1)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _compositions(layer, exhaustive: bool):
    """Every enumerated composition; for TAGCN K=3 (130 of them, equal by the same rules
    as K=2's 16, which are all tested) the default and the kept ones unless exhaustive."""
    every = enumerate_compositions(layer.plan_expression())
    if exhaustive or len(every) <= 40:
        return every
    return [every[0], *candidates(layer.plan_expression())]


@pytest.mark.parametrize("name,make_ours,make_theirs", _pairs(), ids=[p[0] for p in _pairs()])
def test_equal_to_pyg_under_every_composition(name, make_ours, make_theirs):
    ours, theirs = _randomised(make_ours(), make_theirs())
    for number, (graph_name, graph) in enumerate(random_graphs()):
        x = torch.randn(graph.num_nodes, 6)
        want = theirs(x, torch.stack([graph.src, graph.dst]))
        for composition in _compositions(ours, exhaustive=number == 0):
            ours.plan = composition
            got = ours(graph, x)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10,
                                       msg=lambda m: f"{graph_name}, {composition}: {m}")


def _gradients(layer, graph, x):
    x = x.clone().requires_grad_(True)
    out = layer(graph, x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    return grads


@pytest.mark.parametrize("name,make_ours,make_theirs", _pairs(), ids=[p[0] for p in _pairs()])
def test_every_composition_trains_like_the_default(name, make_ours, make_theirs):
    ours, _ = _randomised(make_ours(), make_theirs())
    graph = random_graphs()[0][1]
    x = torch.randn(graph.num_nodes, 6)
    ours.plan = None
    want = _gradients(ours, graph, x)
    for composition in _compositions(ours, exhaustive=False):
        ours.plan = composition
        for got, expected in zip(_gradients(ours, graph, x), want, strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)


def _block_reference_gcn(layer, block, x):
    """Dense D_dst^-1/2 A D_src^-1/2 X W + b with block degrees."""
    adjacency = torch.zeros(block.num_dst_nodes, block.num_src_nodes)
    adjacency.index_put_((block.dst, block.src), torch.ones(block.num_edges), accumulate=True)
    in_degree, out_degree = adjacency.sum(1), adjacency.sum(0)
    scale = lambda d: torch.where(d > 0, d.clamp(min=1) ** -0.5, torch.zeros_like(d))  # noqa: E731
    norm = scale(in_degree)[:, None] * adjacency * scale(out_degree)[None, :]
    return norm @ x @ layer.lin.weight.t() + layer.bias


def test_gcn_on_a_block_under_every_composition():
    block = random_block()
    layer = GCNConv(6, 4)
    with torch.no_grad():
        layer.bias.uniform_(-1, 1)
    x = torch.randn(block.num_src_nodes, 6)
    want = _block_reference_gcn(layer, block, x)
    for composition in enumerate_compositions(layer.plan_expression()):
        layer.plan = composition
        torch.testing.assert_close(layer(block, x), want, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("ours_cls,theirs_cls", [(GATConv, "GATConv"), (GATv2Conv, "GATv2Conv")])
def test_attention_on_a_block_equals_pyg_bipartite(ours_cls, theirs_cls):
    block = random_block(seed=3)
    theirs = getattr(pyg, theirs_cls)(6, 4, heads=2, add_self_loops=False)
    ours, theirs = _randomised(ours_cls(6, 4, heads=2, add_self_loops=False), theirs)
    x = torch.randn(block.num_src_nodes, 6)
    # PyG takes the bipartite sizes from the (source, destination) feature pair.
    want = theirs((x, x[: block.num_dst_nodes]), torch.stack([block.src, block.dst]))
    for composition in enumerate_compositions(ours.plan_expression()):
        ours.plan = composition
        torch.testing.assert_close(ours(block, x), want, rtol=1e-9, atol=1e-10)


def test_multi_hop_layers_reject_blocks():
    with pytest.raises(ValueError, match="square graph"):
        SGConv(6, 4, K=2)(random_block(), torch.randn(19, 6))


def test_bad_input_names_the_problem():
    graph = random_graphs()[0][1]
    with pytest.raises(ValueError, match=r"num_src_nodes=23, in_channels=6"):
        GCNConv(6, 4)(graph, torch.randn(5, 6))
    with pytest.raises(TypeError, match="floating"):
        GATConv(6, 4)(graph, torch.ones(23, 6, dtype=torch.long))
    with pytest.raises(TypeError, match="kernel protocol"):
        GCNConv(6, 4)(object(), torch.randn(23, 6))


def test_a_plan_of_another_layer_is_refused():
    gat, gcn = GATConv(6, 4), GCNConv(6, 4)
    gcn.plan = enumerate_compositions(gat.plan_expression())[0]
    with pytest.raises(ValueError, match="not a composition of this layer"):
        gcn(random_graphs()[0][1], torch.randn(23, 6))
