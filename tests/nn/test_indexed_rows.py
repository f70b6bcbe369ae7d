"""IndexedRows: a first layer fed the table and the index equals one fed table[index]."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.graph import Graph
from gnnforge.nn import IndexedRows, NodeClassifier, SAGEConv
from gnnforge.nn._indexed_rows import TableSources
from gnnforge.ops._native import available
from gnnforge.sampling import NeighborSampler


def _graph(num_nodes: int, num_edges: int, seed: int) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_nodes, 1), (num_edges if num_nodes else 0,),
                        generator=generator)
    dst = torch.randint(0, max(num_nodes, 1), (num_edges if num_nodes else 0,),
                        generator=generator)
    return Graph(src, dst, num_nodes=num_nodes)


def _outputs_and_grads(conv: SAGEConv, graph, x, leaves):
    out = conv(graph, x)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                          dtype=out.dtype)
    grads = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
    return out, grads


@settings(max_examples=60, deadline=None)
@given(num_nodes=st.integers(1, 60), num_edges=st.integers(0, 300),
       seeds=st.integers(0, 12), fanout=st.integers(1, 6), seed=st.integers(0, 2**16),
       aggr=st.sampled_from(["mean", "sum", "add", "max"]),
       options=st.sampled_from([{}, {"normalize": True}, {"root_weight": False},
                                {"bias": False}, {"project": True}]),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       backend=st.sampled_from(["auto", "numba", "native:sse2", "native:avx2", "torch"]))
def test_sage_conv_on_a_sampled_block_equals_the_gathered_rows(
        num_nodes, num_edges, seeds, fanout, seed, aggr, options, dtype, backend):
    # Every CPU backend the measured choice may pick (AVX2 and SSE2 builds stand in for
    # machines without AVX-512) against the default's gathered path.
    if backend.startswith("native") and not available():
        backend = "numba"
    graph = _graph(num_nodes, num_edges, seed)
    batch = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))[:seeds]
    block = NeighborSampler([fanout]).sample(
        graph, batch, generator=torch.Generator().manual_seed(seed))[0]
    table = torch.randn(num_nodes, 5, generator=torch.Generator().manual_seed(seed),
                        dtype=dtype)
    torch.manual_seed(seed)
    conv = SAGEConv(5, 3, aggr=aggr, **options).to(dtype)
    leaves = list(conv.parameters())
    gathered, gathered_grads = _outputs_and_grads(conv, block, table[block.src_nodes], leaves)
    with ops.use_backend(backend):
        indexed, indexed_grads = _outputs_and_grads(
            conv, block, IndexedRows(table, block.src_nodes), leaves)
    assert indexed.shape == (block.num_dst_nodes, 3)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(indexed, gathered, **tolerance)
    for ours, reference in zip(indexed_grads, gathered_grads, strict=True):
        torch.testing.assert_close(ours, reference, **tolerance)


@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_a_learnt_table_gets_the_gradient_of_its_gathered_rows(aggr):
    graph = _graph(40, 200, 3)
    index = torch.randint(0, 25, (40,), generator=torch.Generator().manual_seed(4))
    table = torch.randn(25, 6, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    conv = SAGEConv(6, 4, aggr=aggr).double()
    gathered, (reference,) = _outputs_and_grads(conv, graph, table[index], [table])
    indexed, (ours,) = _outputs_and_grads(conv, graph, IndexedRows(table, index), [table])
    torch.testing.assert_close(indexed, gathered)
    torch.testing.assert_close(ours, reference)


@settings(max_examples=40, deadline=None)
@given(num_nodes=st.integers(1, 50), num_edges=st.integers(0, 250), seeds=st.integers(0, 10),
       seed=st.integers(0, 2**16), conv=st.sampled_from(["sage", "gcn"]),
       rates=st.sampled_from([(0.5, 0.0), (0.5, None), (0.0, 0.3), (0.0, None)]),
       training=st.booleans())
def test_node_classifier_on_indexed_rows_equals_the_gathered_rows(
        num_nodes, num_edges, seeds, seed, conv, rates, training):
    # The rows stay in the table exactly when a SAGE first layer draws no input dropout;
    # otherwise they are gathered first and the same masks are drawn.
    dropout, input_dropout = rates
    graph = _graph(num_nodes, num_edges, seed)
    batch = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))[:seeds]
    blocks = NeighborSampler([3, 2]).sample(graph, batch,
                                            generator=torch.Generator().manual_seed(seed))
    table = torch.randn(num_nodes, 5, generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    model = NodeClassifier(5, 6, 3, num_layers=2, conv=conv, dropout=dropout,
                           input_dropout=input_dropout).train(training)
    leaves = list(model.parameters())
    torch.manual_seed(seed + 1)
    gathered = model(blocks, table[blocks[0].src_nodes])
    reference = torch.autograd.grad(gathered.sum(), leaves, allow_unused=True)
    gathers = []
    materialize = IndexedRows.materialize
    torch.manual_seed(seed + 1)
    with mock.patch.object(IndexedRows, "materialize",
                           lambda rows: gathers.append(1) or materialize(rows)):
        indexed = model(blocks, IndexedRows(table, blocks[0].src_nodes))
    ours = torch.autograd.grad(indexed.sum(), leaves, allow_unused=True)
    rate = dropout if input_dropout is None else input_dropout
    assert len(gathers) == int(conv == "gcn" or (training and rate > 0))
    torch.testing.assert_close(indexed, gathered, rtol=1e-5, atol=1e-5)
    for mine, theirs in zip(ours, reference, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_node_classifier_drops_the_input_at_its_own_rate():
    x = torch.ones(200, 4)
    graph = _graph(200, 0, 0)
    model = NodeClassifier(4, 4, 2, num_layers=1, dropout=0.0, input_dropout=0.5)
    with torch.no_grad():
        model.convs[0].lin_l.weight.zero_()
        model.convs[0].lin_r.weight.copy_(torch.eye(2, 4))
        model.convs[0].lin_l.bias.zero_()
    out = model(graph, x)
    assert set(out.unique().tolist()) == {0.0, 2.0}                  # dropped, or scaled
    assert torch.equal(model.eval()(graph, x), torch.ones(200, 2))   # eval: untouched
    assert NodeClassifier(4, 4, 2, dropout=0.3).input_dropout == 0.3  # None: --dropout


def test_table_sources_name_table_rows_in_the_graphs_edge_order():
    graph = _graph(7, 20, 5)
    index = torch.tensor([6, 0, 0, 3, 2, 1, 5], dtype=torch.int32)
    view = TableSources(graph, index, 9)
    (src, dst), (plain_src, plain_dst) = view.coo(), graph.coo()
    assert torch.equal(src, index[plain_src].long()) and torch.equal(dst, plain_dst)
    rowptr, col, _ = view.csr(torch.int32)
    plain_rowptr, plain_col, _ = graph.csr()
    assert col.dtype == torch.int32 and torch.equal(rowptr.long(), plain_rowptr)
    assert torch.equal(col.long(), index[plain_col].long())
    colptr, _, _ = view.csc()
    assert colptr.numel() == 10 and (view.num_src_nodes, view.num_dst_nodes) == (9, 7)


def test_materialize_and_head_gather_the_rows():
    table = torch.arange(12.0).reshape(6, 2)
    rows = IndexedRows(table, torch.tensor([5, 1, 1, 0]))
    assert rows.shape == (4, 2) and rows.dtype == torch.float32
    assert torch.equal(rows.materialize(), table[[5, 1, 1, 0]])
    assert torch.equal(rows.head(2), table[[5, 1]])
    assert "shape=(4, 2)" in repr(rows)


def test_bad_inputs_are_refused_with_the_offending_item():
    table = torch.zeros(4, 3)
    with pytest.raises(TypeError, match="2-D tensor"):
        IndexedRows(torch.zeros(4), torch.tensor([0]))
    with pytest.raises(TypeError, match="int32/int64"):
        IndexedRows(table, torch.tensor([0.0]))
    with pytest.raises(ValueError, match=r"index\[2\] = 4 is outside \[0, 4\)"):
        IndexedRows(table, torch.tensor([0, 3, 4, -1]))
    graph = _graph(5, 10, 0)
    with pytest.raises(ValueError, match="num_src_nodes=5, 3"):
        SAGEConv(3, 2)(graph, IndexedRows(table, torch.tensor([0, 1])))
    with pytest.raises(ValueError, match="num_src_nodes=5, 2"):
        SAGEConv(2, 2)(graph, IndexedRows(table, torch.tensor([0, 1, 2, 3, 0])))
