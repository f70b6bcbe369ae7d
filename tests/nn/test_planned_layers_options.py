"""Every PyG option of GCN, SGC, TAGCN, GAT and GATv2 (edge weights, improved, normalize,
cached, attention dropout, edge features with every fill_value, residual) equals
torch_geometric's layer with the same weights: outputs, input gradients, every parameter
gradient and the edge weights' gradients, under every composition the planner may pick."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GATv2Conv, GCNConv, SGConv, TAGConv
from gnnforge.plan import candidates, enumerate_compositions
from .planned_graphs import random_block, random_graphs

pyg = pytest.importorskip("torch_geometric.nn")

TOL = dict(rtol=1e-9, atol=1e-10)


@pytest.fixture(autouse=True)
def _float64_single_thread():
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


def _copy(ours, theirs):
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.uniform_(-1, 1)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _plans(layer):
    """The default and the planner's kept compositions (all of them when few)."""
    every = enumerate_compositions(layer.plan_expression())
    return every if len(every) <= 16 else [every[0], *candidates(layer.plan_expression())]


def _run(module, call, x, edge_input):
    """Output and gradients of x, of every named parameter and of the edge input."""
    x = x.clone().requires_grad_(True)
    edge_input = None if edge_input is None else edge_input.clone().requires_grad_(True)
    out = call(module, x, edge_input)
    weight = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out * weight).sum().backward()
    grads = {"x": x.grad}
    if edge_input is not None:
        grads["edge"] = (torch.zeros_like(edge_input) if edge_input.grad is None
                         else edge_input.grad)
    # A parameter that never reached the output (lin_edge on a graph without edges) has
    # no gradient in one library and a zero one in the other: both mean zero.
    grads.update({name: torch.zeros_like(p) if p.grad is None else p.grad.clone()
                  for name, p in module.named_parameters()})
    module.zero_grad()
    return out, grads


def _assert_same(ours, theirs, graph, x, edge_input, call_ours, call_theirs, what):
    want, want_grads = _run(theirs, call_theirs, x, edge_input)
    for plan in _plans(ours):
        ours.plan = plan
        got, got_grads = _run(ours, call_ours, x, edge_input)
        torch.testing.assert_close(got, want, **TOL, msg=lambda m: f"{what} {plan}: {m}")
        assert got_grads.keys() == want_grads.keys()
        for name, grad in want_grads.items():
            torch.testing.assert_close(got_grads[name], grad, **TOL,
                                       msg=lambda m: f"{what} {plan} grad {name}: {m}")


def _index(graph):
    return torch.stack([graph.src, graph.dst])


def _weights(graph, seed=1):
    return torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(seed)) + 0.1


GCN_OPTIONS = [dict(), dict(improved=True), dict(normalize=False),
               dict(add_self_loops=False), dict(bias=False), dict(improved=True, bias=False)]


@pytest.mark.parametrize("options", GCN_OPTIONS, ids=str)
@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
def test_gcn_options_equal_pyg(options, weighted):
    for name, graph in random_graphs():
        ours, theirs = _copy(GCNConv(6, 4, **options), pyg.GCNConv(6, 4, **options))
        x = torch.randn(graph.num_nodes, 6)
        weight = _weights(graph) if weighted else None
        # PyG 2.8 applies `improved` only when it is given weights: pass it ones.
        pyg_weight = (lambda w: torch.ones(graph.num_edges) if w is None and
                      options.get("improved") else w)
        _assert_same(ours, theirs, graph, x, weight,
                     lambda m, h, w: m(graph, h, w),
                     lambda m, h, w: m(h, _index(graph), pyg_weight(w)), f"{name} {options}")


def test_gcn_reads_the_graphs_edge_weights():
    graph = random_graphs()[0][1]
    weight = _weights(graph)
    weighted = Graph(graph.src, graph.dst, graph.num_nodes, edge_data={"edge_weight": weight})
    ours, theirs = _copy(GCNConv(6, 4), pyg.GCNConv(6, 4))
    x = torch.randn(graph.num_nodes, 6)
    torch.testing.assert_close(ours(weighted, x), theirs(x, _index(graph), weight), **TOL)
    assert not torch.allclose(ours(weighted, x), ours(graph, x))


def test_gcn_cached_keeps_the_first_normalisation():
    graph = random_graphs()[0][1]
    ours, theirs = _copy(GCNConv(6, 4, cached=True), pyg.GCNConv(6, 4, cached=True))
    x = torch.randn(graph.num_nodes, 6)
    first, second = _weights(graph, 1), _weights(graph, 2)
    torch.testing.assert_close(ours(graph, x, first), theirs(x, _index(graph), first), **TOL)
    # Both reuse the first call's normalisation and ignore the new weights.
    torch.testing.assert_close(ours(graph, x, second), theirs(x, _index(graph), second), **TOL)
    fresh = GCNConv(6, 4)
    fresh.load_state_dict(ours.state_dict())
    assert not torch.allclose(ours(graph, x, second), fresh(graph, x, second))
    # Another graph is normalised, not served the first graph's normalisation.
    other = random_graphs(seed=1)[0][1]
    fresh_other = fresh(other, x, second)
    torch.testing.assert_close(ours(other, x, second), fresh_other, **TOL)
    ours.reset_parameters()
    assert ours._cached_structure is None


def _inv_sqrt(degree):
    return torch.where(degree > 0, degree.clamp(min=1e-300) ** -0.5, torch.zeros_like(degree))


def test_gcn_on_a_block_with_edge_weights():
    block = random_block()
    weight = _weights(block)
    layer = GCNConv(6, 4)
    x = torch.randn(block.num_src_nodes, 6)
    adjacency = torch.zeros(block.num_dst_nodes, block.num_src_nodes)
    adjacency.index_put_((block.dst, block.src), weight, accumulate=True)
    norm = (_inv_sqrt(adjacency.sum(1))[:, None] * adjacency
            * _inv_sqrt(adjacency.sum(0))[None, :])
    want = norm @ x @ layer.lin.weight.t() + layer.bias
    for plan in _plans(layer):
        layer.plan = plan
        torch.testing.assert_close(layer(block, x, weight), want, **TOL)


@pytest.mark.parametrize("make_ours,make_theirs", [
    (lambda: SGConv(6, 4, K=2), lambda: pyg.SGConv(6, 4, K=2)),
    (lambda: SGConv(6, 4, K=2, add_self_loops=False),
     lambda: pyg.SGConv(6, 4, K=2, add_self_loops=False)),
    (lambda: TAGConv(6, 4, K=2), lambda: pyg.TAGConv(6, 4, K=2)),
    (lambda: TAGConv(6, 4, K=2, normalize=False), lambda: pyg.TAGConv(6, 4, K=2, normalize=False)),
], ids=["sgc", "sgc-noloops", "tag", "tag-unnormalised"])
@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
def test_sgc_tag_edge_weights_equal_pyg(make_ours, make_theirs, weighted):
    for name, graph in random_graphs():
        ours, theirs = _copy(make_ours(), make_theirs())
        x = torch.randn(graph.num_nodes, 6)
        weight = _weights(graph) if weighted else None
        _assert_same(ours, theirs, graph, x, weight, lambda m, h, w: m(graph, h, w),
                     lambda m, h, w: m(h, _index(graph), w), name)


def test_sgc_cached_reuses_the_propagated_input():
    graph = random_graphs()[0][1]
    ours, theirs = _copy(SGConv(6, 4, K=2, cached=True), pyg.SGConv(6, 4, K=2, cached=True))
    x, other = torch.randn(graph.num_nodes, 6), torch.randn(graph.num_nodes, 6)
    torch.testing.assert_close(ours(graph, x), theirs(x, _index(graph)), **TOL)
    torch.testing.assert_close(ours(graph, other), theirs(other, _index(graph)), **TOL)
    torch.testing.assert_close(ours(graph, other), ours(graph, x))


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
def test_sgc_cached_first_call_is_differentiable_as_in_pyg(weighted):
    # PyG keeps the first cached call in the autograd graph (x and edge weights get their
    # gradients); only later calls read the stored, detached A^K X.
    for name, graph in random_graphs():
        x = torch.randn(graph.num_nodes, 6)
        weight = _weights(graph) if weighted else None
        theirs = _copy(SGConv(6, 4, K=2), pyg.SGConv(6, 4, K=2, cached=True))[1]
        want, want_grads = _run(theirs, lambda m, h, w: m(h, _index(graph), w), x, weight)
        for plan in [None, *candidates(SGConv(6, 4, K=2).plan_expression())]:
            ours = _copy(SGConv(6, 4, K=2, cached=True), pyg.SGConv(6, 4, K=2))[0]
            ours.plan = plan
            got, got_grads = _run(ours, lambda m, h, w: m(graph, h, w), x, weight)
            torch.testing.assert_close(got, want, **TOL)
            for key, grad in want_grads.items():
                torch.testing.assert_close(got_grads[key], grad, **TOL,
                                           msg=lambda m: f"{name} {plan} grad {key}: {m}")
            # The second call reuses the detached value: no gradient reaches x.
            again = x.clone().requires_grad_(True)
            ours(graph, again).sum().backward()
            assert again.grad is None


FILLS = ["mean", "add", "min", "max", "mul", 0.5, "tensor"]


def _fill(value):
    return torch.tensor([0.3, -0.2]) if value == "tensor" else value


ATTENTION = {"gat": (GATConv, "GATConv"), "gatv2": (GATv2Conv, "GATv2Conv")}


@pytest.mark.parametrize("kind", ATTENTION)
@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_attention_edge_features_equal_pyg(kind, fill):
    ours_cls, theirs_name = ATTENTION[kind]
    options = dict(heads=2, edge_dim=2, fill_value=_fill(fill))
    for name, graph in random_graphs():
        ours, theirs = _copy(ours_cls(6, 4, **options),
                             getattr(pyg, theirs_name)(6, 4, **options))
        x = torch.randn(graph.num_nodes, 6)
        edge_attr = torch.randn(graph.num_edges, 2)
        _assert_same(ours, theirs, graph, x, edge_attr, lambda m, h, e: m(graph, h, e),
                     lambda m, h, e: m(h, _index(graph), e), f"{name} fill={fill}")


ATTENTION_OPTIONS = [dict(residual=True), dict(residual=True, concat=False, heads=3),
                     dict(add_self_loops=False, edge_dim=3), dict(negative_slope=0.05),
                     dict(bias=False, residual=True)]


@pytest.mark.parametrize("kind", ATTENTION)
@pytest.mark.parametrize("options", ATTENTION_OPTIONS, ids=str)
def test_attention_options_equal_pyg(kind, options):
    ours_cls, theirs_name = ATTENTION[kind]
    for name, graph in random_graphs():
        ours, theirs = _copy(ours_cls(6, 4, **options),
                             getattr(pyg, theirs_name)(6, 4, **options))
        x = torch.randn(graph.num_nodes, 6)
        edge_attr = torch.randn(graph.num_edges, 3) if "edge_dim" in options else None
        _assert_same(ours, theirs, graph, x, edge_attr, lambda m, h, e: m(graph, h, e),
                     lambda m, h, e: m(h, _index(graph), e), f"{name} {options}")


@pytest.mark.parametrize("kind", ATTENTION)
def test_attention_dropout_draws_pygs_mask(kind):
    ours_cls, theirs_name = ATTENTION[kind]
    graph = random_graphs()[0][1]
    ours, theirs = _copy(ours_cls(6, 4, heads=2, dropout=0.4),
                         getattr(pyg, theirs_name)(6, 4, heads=2, dropout=0.4))
    x = torch.randn(graph.num_nodes, 6)
    for plan in _plans(ours):
        ours.plan = plan
        torch.manual_seed(7)
        got = ours(graph, x)
        torch.manual_seed(7)
        want = theirs(x, _index(graph))
        torch.testing.assert_close(got, want, **TOL)
    ours.eval()
    theirs.eval()
    torch.testing.assert_close(ours(graph, x), theirs(x, _index(graph)), **TOL)
    ours.train()
    assert not torch.allclose(ours(graph, x), ours.eval()(graph, x))


@pytest.mark.parametrize("kind", ATTENTION)
def test_attention_residual_on_a_block_equals_pyg_bipartite(kind):
    ours_cls, theirs_name = ATTENTION[kind]
    block = random_block(seed=3)
    options = dict(heads=2, add_self_loops=False, residual=True, edge_dim=2)
    ours, theirs = _copy(ours_cls(6, 4, **options), getattr(pyg, theirs_name)(6, 4, **options))
    x = torch.randn(block.num_src_nodes, 6)
    edge_attr = torch.randn(block.num_edges, 2)
    want = theirs((x, x[: block.num_dst_nodes]), torch.stack([block.src, block.dst]), edge_attr)
    for plan in _plans(ours):
        ours.plan = plan
        torch.testing.assert_close(ours(block, x, edge_attr), want, **TOL)


def _typed(graph):
    types = torch.arange(graph.num_edges) % 3
    return Graph(graph.src, graph.dst, graph.num_nodes, edge_type=types)


@pytest.mark.parametrize("make", [lambda: GCNConv(6, 4), lambda: GATConv(6, 4, heads=2),
                                  lambda: GATv2Conv(6, 4), lambda: SGConv(6, 4, K=2),
                                  lambda: TAGConv(6, 4, K=2)],
                         ids=["gcn", "gat", "gatv2", "sgc", "tag"])
def test_edge_types_are_ignored(make):
    layer = make()
    for _, graph in random_graphs():
        x = torch.randn(graph.num_nodes, 6)
        torch.testing.assert_close(layer(_typed(graph), x), layer(graph, x))


@pytest.mark.parametrize("make", [lambda: GCNConv(6, 4), lambda: SGConv(6, 4, K=2),
                                  lambda: TAGConv(6, 4, K=2), lambda: GATConv(6, 4)],
                         ids=["gcn", "sgc", "tag", "gat"])
def test_float64_then_float32_on_one_graph(make):
    layer = make()
    graph = random_graphs()[0][1]
    x = torch.randn(graph.num_nodes, 6)
    state = {k: v.clone() for k, v in layer.state_dict().items()}
    want64 = layer(graph, x)
    got32 = layer.float()(graph, x.float())
    assert got32.dtype == torch.float32
    torch.testing.assert_close(got32.double(), want64, rtol=1e-4, atol=1e-5)
    layer.double().load_state_dict(state)
    torch.testing.assert_close(layer(graph, x), want64, rtol=0, atol=0)


def test_bad_options_name_the_problem():
    graph = random_graphs()[0][1]
    x = torch.randn(graph.num_nodes, 6)
    with pytest.raises(ValueError, match="add_self_loops=True needs normalize=True"):
        GCNConv(6, 4, normalize=False, add_self_loops=True)
    with pytest.raises(ValueError, match=r"edge_weight must have shape \[num_edges=76\]"):
        GCNConv(6, 4)(graph, x, torch.ones(5))
    with pytest.raises(ValueError, match="no edge_dim"):
        GATConv(6, 4)(graph, x, torch.ones(graph.num_edges, 2))
    with pytest.raises(ValueError, match=r"edge_attr must have shape \[num_edges=76, edge_dim=2\]"):
        GATv2Conv(6, 4, edge_dim=2)(graph, x, torch.ones(graph.num_edges, 3))
    with pytest.raises(ValueError, match="fill_value must be"):
        GATConv(6, 4, edge_dim=2, fill_value="median")(graph, x, torch.ones(graph.num_edges, 2))
    with pytest.raises(ValueError, match="dropout must be in"):
        GATConv(6, 4, dropout=1.5)
