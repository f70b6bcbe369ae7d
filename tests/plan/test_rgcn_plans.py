"""RGCN's re-associations (relation-wise, basis and block-diagonal orders): every
enumerated composition computes the default order's values and gradients on random
typed graphs (hypothesis) including graphs without edges or nodes, single relations,
self-loops, multi-edges and bipartite blocks; the planner enumerates, prunes, costs and
chooses them like any planned layer."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnforge.graph import BipartiteGraph, Graph
from gnnforge.nn import RGCNConv
from gnnforge.plan import auto_plans, candidates, configure_auto, enumerate_compositions
from gnnforge.plan import enumerate_trees, optimize
from gnnforge.plan._expressions import rgcn_expression
from gnnforge.plan._primitives import primitives

from .test_optimize import AnalyticModel
from .test_reassociations import value_and_grads

LAYERS = {
    "full-mean": lambda r: RGCNConv(5, 3, r),
    "full-sum-noroot": lambda r: RGCNConv(5, 7, r, aggr="sum", root_weight=False),
    "basis-mean": lambda r: RGCNConv(5, 3, r, num_bases=2),
    "basis-sum": lambda r: RGCNConv(5, 7, r, num_bases=3, aggr="add"),
    "basis-mean-nobias": lambda r: RGCNConv(5, 3, r, num_bases=1, bias=False),
    "block-mean": lambda r: RGCNConv(4, 6, r, num_blocks=2),
    "block-sum": lambda r: RGCNConv(6, 3, r, num_blocks=3, aggr="sum"),
}


@st.composite
def typed_graphs(draw):
    """(graph, edge types, number of relations); a bipartite block one time in three."""
    relations = draw(st.integers(1, 4))
    num_src = draw(st.integers(0, 12))
    bipartite = draw(st.integers(0, 2)) == 0
    num_dst = draw(st.integers(0, num_src)) if bipartite else num_src
    edges = draw(st.integers(0, 40)) if num_src and num_dst else 0
    src = draw(st.lists(st.integers(0, max(num_src - 1, 0)), min_size=edges, max_size=edges))
    dst = draw(st.lists(st.integers(0, max(num_dst - 1, 0)), min_size=edges, max_size=edges))
    types = draw(st.lists(st.integers(0, relations - 1), min_size=edges, max_size=edges))
    src, dst = torch.tensor(src, dtype=torch.long), torch.tensor(dst, dtype=torch.long)
    graph = (BipartiteGraph(src, dst, num_src, num_dst) if bipartite
             else Graph(src, dst, num_src))
    return graph, torch.tensor(types, dtype=torch.long), relations


@pytest.mark.parametrize("name", sorted(LAYERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed=typed_graphs(), seed=st.integers(0, 2**16))
def test_every_rgcn_composition_equals_the_default_order(name, typed, seed):
    graph, edge_type, relations = typed
    torch.manual_seed(seed)
    layer = LAYERS[name](relations).double()
    x = torch.randn(graph.num_src_nodes, layer.in_channels, dtype=torch.float64)
    layer.plan = "default"
    want = value_and_grads(layer, graph, x, edge_type)
    compositions = enumerate_compositions(layer.plan_expression())
    assert len(compositions) > 1
    for composition in compositions:
        layer.plan = composition
        for got, expected in zip(value_and_grads(layer, graph, x, edge_type), want,
                                 strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)


def test_the_default_order_is_the_relation_wise_reference():
    """The planned default equals the unplanned relation-wise code (max's path), itself
    tested equal to PyG's RGCNConv in tests/nn/test_layers_pyg.py."""
    generator = torch.Generator().manual_seed(3)
    graph = Graph(torch.randint(0, 20, (90,), generator=generator),
                  torch.randint(0, 20, (90,), generator=generator), 20,
                  edge_type=torch.randint(0, 4, (90,), generator=generator))
    for make in LAYERS.values():
        layer = make(4).double()
        x = torch.randn(20, layer.in_channels, dtype=torch.float64, generator=generator)
        layer.plan = "default"
        torch.testing.assert_close(layer(graph, x),
                                   layer._relation_wise(graph, x, graph.edge_type))


def test_basis_orders_are_enumerated_and_each_regime_keeps_a_basis_plan():
    trees = [str(t) for t in enumerate_trees(rgcn_expression("mean", "basis"))]
    # PyG's order, transform first, mix the aggregates, basis adjacencies, project by bases
    for part in ("((Ar @ X) @ mix(C, V))", "(Ar @ (X @ mix(C, V)))", "mix_t(C, (Ar @ X)) @ V",
                 "((mix_t(C, Ar) @ X) @ V)", "(mix_t(C, Ar) @ (X @ V))"):
        assert any(part in tree for tree in trees), part
    narrow_in = [str(c) for c in candidates(rgcn_expression("mean", "basis"), 16, 256)]
    wide_in = [str(c) for c in candidates(rgcn_expression("mean", "basis"), 256, 16)]
    assert any("((mix_t(C, Ar) @ X) @ V)" in c for c in narrow_in)
    assert any("(mix_t(C, Ar) @ (X @ V))" in c for c in wide_in)


def test_relation_products_cost_one_row_per_edge_not_per_relation():
    """Each edge has one relation: aggregating per relation is an SpMM of width F over E
    edges (not R x F); the fused transform-first order is one weighted SpMM."""
    default, *_ = enumerate_compositions(rgcn_expression("mean"))
    sparse = [str(p) for p in primitives(default) if p.name.startswith("spmm")]
    assert sparse == ["spmm_u(f=I)"]
    first = next(c for c in enumerate_compositions(rgcn_expression("mean"))
                 if "(Ar @ (X @ W))" in str(c))
    assert [str(p) for p in primitives(first) if p.name.startswith("spmm")] == ["spmm_w(f=O)"]
    block = enumerate_compositions(rgcn_expression("sum", "block"))[0]
    assert any(p.name == "gemm" and ("k", ("Ib",)) in p.sizes for p in primitives(block))


def test_rgcn_is_planned_automatically_and_by_optimize():
    generator = torch.Generator().manual_seed(1)
    graph = Graph(torch.randint(0, 50, (300,), generator=generator),
                  torch.randint(0, 50, (300,), generator=generator), 50,
                  edge_type=torch.randint(0, 5, (300,), generator=generator))
    layer = RGCNConv(64, 8, 5, num_bases=2)
    plan = optimize(layer, graph, cost_model=AnalyticModel())
    assert len(plan.decisions[0].costs) >= 2 and layer.plan == plan.decisions[0].chosen
    previous = configure_auto(measure="always", cost_model=AnalyticModel())
    try:
        auto = RGCNConv(64, 8, 5, num_bases=2).eval()  # inference: a call is timed at once
        auto.load_state_dict(layer.state_dict())
        x = torch.randn(50, 64, generator=generator)
        want = auto._relation_wise(graph, x, graph.edge_type)
        for _ in range(30):  # every call, measured or not, has the default's values
            torch.testing.assert_close(auto(graph, x), want, rtol=1e-5, atol=1e-5)
        (entry,) = auto_plans(auto).values()
        assert entry.plan is not None and len(entry.race.plans) >= 2
    finally:
        configure_auto(**vars(previous))


def test_bad_decompositions_name_the_problem():
    with pytest.raises(ValueError, match="num_bases and num_blocks"):
        RGCNConv(4, 4, 2, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="divide in_channels=5"):
        RGCNConv(5, 4, 2, num_blocks=2)
    with pytest.raises(ValueError, match="decomposition must be one of"):
        rgcn_expression("mean", "tensor")
    with pytest.raises(ValueError, match="aggr must be 'mean' or 'sum'"):
        rgcn_expression("max")
