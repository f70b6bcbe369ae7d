"""SparseFeatures: the sparse first-layer path equals the dense one (values and gradients)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.nn import GCNConv, SparseFeatures


def _sparse_matrix(rows, cols, density, seed, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(rows, cols, generator=generator, dtype=dtype)
    keep = torch.rand(rows, cols, generator=generator) < density
    if rows:
        keep[generator.seed() % rows] = False  # at least one all-zero row (no features)
    return x * keep


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(0, 30), cols=st.integers(1, 20), density=st.floats(0.0, 1.0),
       width=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_matmul_equals_dense(rows, cols, density, width, seed):
    x = _sparse_matrix(rows, cols, density, seed)
    sparse = SparseFeatures.from_dense(x)
    assert sparse.nnz == int((x != 0).sum()) and torch.equal(sparse.to_dense(), x)
    weight = torch.randn(cols, width, dtype=torch.float64, requires_grad=True)
    dense_weight = weight.detach().clone().requires_grad_()
    out = sparse.matmul(weight)
    expected = x @ dense_weight
    torch.testing.assert_close(out, expected)
    upstream = torch.randn(rows, width, dtype=torch.float64)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(weight.grad, dense_weight.grad)


def test_dropout_draws_only_for_non_zeros():
    x = _sparse_matrix(50, 40, 0.05, seed=3)
    sparse = SparseFeatures.from_dense(x)
    assert sparse.dropout(0.5, training=False) is sparse and sparse.dropout(0.0) is sparse
    torch.manual_seed(0)
    dropped = sparse.dropout(0.25).to_dense()
    kept = dropped != 0
    assert not bool((kept & (x == 0)).any())                       # zeros stay zero
    torch.testing.assert_close(dropped[kept], x[kept] / 0.75)      # survivors are rescaled
    rate = 1 - kept.sum() / (x != 0).sum()
    assert 0.1 < float(rate) < 0.4
    assert sparse.dropout(1.0).nnz == sparse.nnz and not bool(sparse.dropout(1.0).to_dense().any())
    with pytest.raises(ValueError, match="p must lie in"):
        sparse.dropout(1.5)


def _graph_with_loops_and_multi_edges(num_nodes, seed):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (4 * num_nodes,), generator=generator)
    dst = torch.randint(0, num_nodes, (4 * num_nodes,), generator=generator)
    src = torch.cat([src, src[:5], torch.arange(3)])  # multi-edges and self-loops
    dst = torch.cat([dst, dst[:5], torch.arange(3)])
    return Graph(src, dst, num_nodes + 2)                # two isolated nodes


@pytest.mark.parametrize("seed", [0, 1])
def test_gcn_conv_sparse_input_equals_dense(seed):
    graph = _graph_with_loops_and_multi_edges(40, seed)
    x = _sparse_matrix(graph.num_nodes, 30, 0.08, seed, dtype=torch.float32)
    torch.manual_seed(seed)
    conv = GCNConv(30, 7)
    out_dense = conv(graph, x)
    grad_dense = torch.autograd.grad(out_dense.square().sum(), list(conv.parameters()))
    out_sparse = conv(graph, SparseFeatures.from_dense(x))
    grad_sparse = torch.autograd.grad(out_sparse.square().sum(), list(conv.parameters()))
    torch.testing.assert_close(out_sparse, out_dense, rtol=1e-5, atol=1e-6)
    for a, b in zip(grad_sparse, grad_dense):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_gcn_conv_sparse_input_equals_pyg():
    pytest.importorskip("torch_geometric")
    from torch_geometric.nn import GCNConv as PygGCNConv

    graph = _graph_with_loops_and_multi_edges(30, 5)
    x = _sparse_matrix(graph.num_nodes, 12, 0.1, 5, dtype=torch.float32)
    torch.manual_seed(0)
    ours = GCNConv(12, 4)
    theirs = PygGCNConv(12, 4)
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(graph, SparseFeatures.from_dense(x)),
                               theirs(x, torch.stack([graph.src, graph.dst])),
                               rtol=1e-5, atol=1e-6)


def test_bad_inputs_are_refused():
    with pytest.raises(TypeError, match="2-D floating"):
        SparseFeatures.from_dense(torch.ones(3, dtype=torch.int64))
    sparse = SparseFeatures.from_dense(torch.eye(4))
    with pytest.raises(ValueError, match=r"other must be \[4, O\]"):
        sparse.matmul(torch.ones(3, 2))
    with pytest.raises(ValueError, match="must have 5 columns"):
        GCNConv(5, 2)(Graph(torch.tensor([0]), torch.tensor([1]), 4), sparse)


def test_rows_gathers_like_dense_indexing():
    x = _sparse_matrix(20, 9, 0.2, seed=7)
    sparse = SparseFeatures.from_dense(x)
    for index in (torch.tensor([3, 3, 0, 19, 7]), torch.zeros(0, dtype=torch.int64),
                  torch.randperm(20)):
        picked = sparse.rows(index)
        assert picked.shape == (index.numel(), 9)
        assert torch.equal(picked.to_dense(), x[index])
    assert torch.equal(sparse.head(4).to_dense(), x[:4]) and sparse.head(20) is sparse
    with pytest.raises(ValueError, match=r"index must lie in \[0, 20\)"):
        sparse.rows(torch.tensor([20]))


@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_sage_conv_sparse_input_on_blocks_equals_dense(aggr):
    from gnnforge.nn import SAGEConv
    from gnnforge.sampling import NeighborSampler

    graph = _graph_with_loops_and_multi_edges(60, 2)
    x = _sparse_matrix(graph.num_nodes, 25, 0.1, 2, dtype=torch.float32)
    sparse = SparseFeatures.from_dense(x)
    blocks = NeighborSampler([4]).sample(graph, torch.arange(0, 60, 3),
                                         generator=torch.Generator().manual_seed(0))
    inputs = blocks[0].src_nodes
    torch.manual_seed(0)
    conv = SAGEConv(25, 6, aggr=aggr)
    for structure in (graph, blocks[0]):
        dense_x = x if structure is graph else x[inputs]
        sparse_x = sparse if structure is graph else sparse.rows(inputs)
        out_dense = conv(structure, dense_x)
        grads_dense = torch.autograd.grad(out_dense.square().sum(), list(conv.parameters()))
        out_sparse = conv(structure, sparse_x)
        grads_sparse = torch.autograd.grad(out_sparse.square().sum(), list(conv.parameters()))
        torch.testing.assert_close(out_sparse, out_dense, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads_sparse, grads_dense):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="linear aggregator"):
        SAGEConv(25, 6, aggr="max")(graph, sparse)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_gat_conv_sparse_input_equals_dense(seed, residual):
    from gnnforge.nn import GATConv
    from gnnforge.sampling import NeighborSampler

    graph = _graph_with_loops_and_multi_edges(40, seed)
    x = _sparse_matrix(graph.num_nodes, 30, 0.08, seed, dtype=torch.float32)
    sparse = SparseFeatures.from_dense(x)
    blocks = NeighborSampler([3]).sample(graph, torch.arange(0, 40, 4),
                                         generator=torch.Generator().manual_seed(seed))
    inputs = blocks[0].src_nodes
    torch.manual_seed(seed)
    conv = GATConv(30, 5, heads=3, residual=residual)
    for structure in (graph, blocks[0]):
        dense_x = x if structure is graph else x[inputs]
        sparse_x = sparse if structure is graph else sparse.rows(inputs)
        out_dense = conv(structure, dense_x)
        grads_dense = torch.autograd.grad(out_dense.square().sum(), list(conv.parameters()))
        out_sparse = conv(structure, sparse_x)
        grads_sparse = torch.autograd.grad(out_sparse.square().sum(), list(conv.parameters()))
        assert out_sparse.shape == (structure.num_dst_nodes, 15)
        torch.testing.assert_close(out_sparse, out_dense, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads_sparse, grads_dense):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="must have 30 columns"):
        conv(graph, SparseFeatures.from_dense(torch.eye(graph.num_nodes)))
