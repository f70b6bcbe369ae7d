"""Banded propagation equals sparse propagation (all edges when in band, else kept edges)."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import Graph
from gnnforge.banded import (
    compile_blocks,
    compile_dataset,
    propagate,
    sparse_propagate,
    typed_in_degree,
)
from gnnforge.data import program_graphs


@st.composite
def typed_graphs(draw, max_slots=48):
    """Random typed multigraphs; `band` limits |src - dst| (None: anywhere)."""
    size = draw(st.integers(1, 8))
    blocks = draw(st.integers(1, 5))
    n = draw(st.integers(0, blocks * size))
    types = draw(st.integers(1, 3))
    band = draw(st.sampled_from([size - 1, size, None]))
    e = draw(st.integers(0, 60)) if n else 0
    src = draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=e, max_size=e))
    offsets = draw(st.lists(st.integers(-(band or n), band or n), min_size=e, max_size=e))
    dst = [min(max(s + o, 0), max(n - 1, 0)) for s, o in zip(src, offsets)]
    etype = draw(st.lists(st.integers(0, types - 1), min_size=e, max_size=e))
    graph = Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64), n,
                  edge_type=torch.tensor(etype, dtype=torch.int64))
    return graph, size, blocks, types


def _kept(graph, blocks):
    keep = torch.nonzero(blocks.kept).flatten()
    return Graph._trusted(graph.src[keep], graph.dst[keep], blocks.num_slots, graph.edge_type[keep])


def _padded(graph, slots):
    return Graph._trusted(graph.src, graph.dst, slots, graph.edge_type)


def _rel_err(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@settings(max_examples=80, deadline=None)
@given(typed_graphs(), st.integers(0, 2**31 - 1))
def test_banded_equals_sparse_over_kept_edges(case, seed):
    graph, size, count, types = case
    blocks = compile_blocks(graph, size, types, count)
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(count * size, 5, generator=g)
    W = torch.randn(types * 5, 4, generator=g)
    reference = sparse_propagate(_kept(graph, blocks), E, W, types)
    assert _rel_err(propagate(blocks, E, W), reference) < 1e-5 or reference.norm() == 0
    # Element-wise, float32 rounding scales with the largest summed value (many parallel
    # edges add up to large entries), so the absolute tolerance scales with it too.
    scale = max(float(reference.abs().max()) if reference.numel() else 0.0, 1.0)
    assert torch.allclose(propagate(blocks, E, W), reference, atol=1e-5 * scale)
    distance = ((graph.src // size) - (graph.dst // size)).abs()
    assert blocks.num_dropped == int((distance > 1).sum())
    assert bool(blocks.kept.all()) or bandwidth_at_least(graph, size)
    assert torch.equal(blocks.in_degree, typed_in_degree(_kept(graph, blocks), types))


def bandwidth_at_least(graph, size):
    return bool(((graph.src - graph.dst).abs() > size).any())


def test_in_band_graph_keeps_every_edge_and_matches_all_edges():
    g = torch.Generator().manual_seed(0)
    n, size, types = 100, 16, 3
    src = torch.randint(0, n, (400,), generator=g)
    dst = (src + torch.randint(-15, 16, (400,), generator=g)).clamp(0, n - 1)
    graph = Graph(src, dst, n, edge_type=torch.randint(0, types, (400,), generator=g))
    blocks = compile_blocks(graph, size, types)
    assert blocks.num_blocks == 7 and blocks.num_dropped == 0
    E = torch.randn(112, 32, generator=g)
    W = torch.randn(types * 32, 32, generator=g)
    assert _rel_err(propagate(blocks, E, W), sparse_propagate(_padded(graph, 112), E, W)) < 1e-5


def test_layout_known_answer():
    # S=2, P=2: edges 0->1 (type 1, diagonal), 2->1 (type 0, upper), 1->2 (type 1, lower)
    graph = Graph([0, 2, 1, 0], [1, 1, 2, 1], 4, edge_type=[1, 0, 1, 1])
    blocks = compile_blocks(graph, 2, 2)
    assert blocks.C.shape == (2, 4, 2) and blocks.U.shape == (1, 4, 2)
    assert blocks.C[0, 1 * 2 + 1, 0] == 2  # slot 1, type 1, from slot 0 (a multi-edge)
    assert blocks.U[0, 1 * 2 + 0, 0] == 1  # into slot 1 of block 0 from slot 0 of block 1
    assert blocks.L[0, 0 * 2 + 1, 1] == 1  # into slot 0 of block 1 from slot 1 of block 0
    assert int(blocks.C.sum() + blocks.U.sum() + blocks.L.sum()) == 4


def test_gradients_match_sparse_and_gradcheck():
    g = torch.Generator().manual_seed(1)
    graph = Graph(torch.tensor([0, 1, 2, 3, 4, 5, 5]), torch.tensor([1, 2, 3, 4, 5, 0, 5]), 6,
                  edge_type=torch.tensor([0, 1, 0, 1, 0, 1, 0]))
    blocks = compile_blocks(graph, 3, 2).to(dtype=torch.float64)
    E = torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    W = torch.randn(8, 3, generator=g, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda e, w: propagate(blocks, e, w), (E, W))
    banded = torch.autograd.grad(propagate(blocks, E, W).pow(2).sum(), (E, W))
    sparse = torch.autograd.grad(sparse_propagate(graph, E, W).pow(2).sum(), (E, W))
    for a, b in zip(banded, sparse):
        assert torch.allclose(a, b, rtol=1e-12)


def test_program_graphs_banded_equals_sparse():
    corpus = program_graphs(max_files=5, progress=False)
    for size in (32, 256):
        compiled = compile_dataset(corpus.graphs, size, 1024 // size, use_cache=False,
                                   progress=False)
        for index in range(min(3, len(compiled.supergraphs))):
            batch, blocks = compiled.supergraph(index)
            g = torch.Generator().manual_seed(index)
            E = torch.randn(batch.num_nodes, 16, generator=g)
            W = torch.randn(6 * 16, 16, generator=g)
            banded = propagate(blocks, E, W)
            assert _rel_err(banded, sparse_propagate(_kept(batch, blocks), E, W)) < 1e-5
            if blocks.num_dropped == 0:
                assert _rel_err(banded, sparse_propagate(batch, E, W)) < 1e-5
            members = compiled.supergraphs[index]
            assert blocks.num_dropped == int(compiled.dropped[members].sum())


def test_errors_name_the_problem():
    graph = Graph([0, 1], [1, 2], 3, edge_type=[0, 2])
    with pytest.raises(ValueError, match="num_edge_types=2"):
        compile_blocks(graph, 2, 2)
    with pytest.raises(ValueError, match="3 nodes"):
        compile_blocks(graph, 1, 3, num_blocks=2)
    with pytest.raises(ValueError, match="block_size"):
        compile_blocks(graph, 0)
    blocks = compile_blocks(graph, 2, 3)
    with pytest.raises(ValueError, match=r"\[4, H\]"):
        propagate(blocks, torch.zeros(3, 2), torch.zeros(6, 2))
    with pytest.raises(ValueError, match="P\\*H"):
        propagate(blocks, torch.zeros(4, 2), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="edge_type goes up to 2"):
        sparse_propagate(graph, torch.zeros(3, 2), torch.zeros(4, 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["banded", "sparse"])
def test_half_precision_models_run_on_float32_structures(dtype, kind):
    """A whole-model cast and autocast both run, on blocks built in float32, and stay near
    the float32 result (bf16 has 8 mantissa bits: a few percent)."""
    from gnnforge.nn import GGNNConv

    g = torch.Generator().manual_seed(0)
    graph = Graph(torch.randint(0, 12, (40,), generator=g), torch.randint(0, 12, (40,), generator=g),
                  16, edge_type=torch.randint(0, 2, (40,), generator=g))
    structure = compile_blocks(graph, 8, 2, 2) if kind == "banded" else graph
    assert kind == "sparse" or structure.C.dtype == torch.float32
    torch.manual_seed(0)
    conv = GGNNConv(8, 2, 2)
    x = torch.randn(16, 8, generator=g)
    expected = conv(x, structure)
    half = copy.deepcopy(conv).to(dtype)
    cast = half(x.to(dtype), structure)
    cast.float().sum().backward()
    assert cast.dtype == dtype and half.weight.grad.dtype == dtype
    assert _rel_err(cast.float(), expected) < 0.05
    with torch.autocast("cpu", dtype=dtype):
        mixed = conv(x, structure)
    mixed.float().sum().backward()
    assert _rel_err(mixed.float(), expected) < 0.05
