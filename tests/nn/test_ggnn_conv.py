"""GGNNConv: banded == sparse with shared parameters, PyG equivalence, errors."""

from __future__ import annotations

import pytest
import torch

from gnnforge import Graph
from gnnforge._compat import available
from gnnforge.banded import compile_blocks
from gnnforge.nn import GGNNConv


def _random_graph(n, e, types, band, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = (src + torch.randint(-band, band + 1, (e,), generator=g)).clamp(0, n - 1)
    return Graph(src, dst, n, edge_type=torch.randint(0, types, (e,), generator=g))


def _layer(hidden, steps, types, seed):
    torch.manual_seed(seed)
    layer = GGNNConv(hidden, steps, types)
    with torch.no_grad():
        layer.bias.normal_()  # non-zero biases, so the in-degree term is exercised
    return layer


def _padded(graph, slots):
    return Graph._trusted(graph.src, graph.dst, slots, graph.edge_type)


@pytest.mark.parametrize("seed", range(3))
def test_banded_equals_sparse_forward_and_backward(seed):
    graph = _random_graph(70, 300, 3, 7, seed)  # bandwidth <= 7 < S = 8
    blocks = compile_blocks(graph, 8, 3)
    assert blocks.num_dropped == 0
    layer = _layer(16, 3, 3, seed)
    x = torch.randn(blocks.num_slots, 10, generator=torch.Generator().manual_seed(seed))
    sparse = layer(x, _padded(graph, blocks.num_slots))
    sparse_grads = torch.autograd.grad(sparse.square().sum(), list(layer.parameters()))
    banded = layer(x, blocks)
    banded_grads = torch.autograd.grad(banded.square().sum(), list(layer.parameters()))
    assert float((banded - sparse).norm() / sparse.norm()) < 1e-5
    for a, b in zip(banded_grads, sparse_grads):
        assert float((a - b).norm() / b.norm().clamp_min(1e-12)) < 1e-4


def test_out_of_band_edges_match_sparse_on_kept_edges():
    graph = _random_graph(40, 200, 2, 20, 5)
    blocks = compile_blocks(graph, 8, 2)
    assert blocks.num_dropped > 0
    keep = torch.nonzero(blocks.kept).flatten()
    kept = Graph._trusted(graph.src[keep], graph.dst[keep], blocks.num_slots, graph.edge_type[keep])
    layer = _layer(8, 2, 2, 0)
    x = torch.randn(blocks.num_slots, 8)
    assert torch.allclose(layer(x, blocks), layer(x, kept), atol=1e-5)
    assert not torch.allclose(layer(x, blocks), layer(x, _padded(graph, 40)), atol=1e-3)


def test_zero_steps_returns_padded_input_and_errors():
    layer = GGNNConv(6, 0, 2)
    graph = Graph([0], [1], 3, edge_type=[1])
    x = torch.randn(3, 4)
    out = layer(x, graph)
    assert torch.equal(out[:, :4], x) and torch.equal(out[:, 4:], torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"\[3, F<=6\]"):
        layer(torch.randn(3, 7), graph)
    with pytest.raises(ValueError, match="2 edge types"):
        GGNNConv(6, 1, 3)(torch.randn(4, 6), compile_blocks(graph, 2, 2))
    with pytest.raises(TypeError, match="BandedBlocks"):
        layer(x, "graph")
    with pytest.raises(ValueError, match="num_steps"):
        GGNNConv(6, -1)


@pytest.mark.skipif(not available("torch_geometric"), reason="torch_geometric not installed")
def test_sparse_equals_pyg_single_edge_type():
    """PyG: one weight per step, no message bias. Ours shares W across steps and has a bias:
    copy our W into every PyG step, zero our bias, share the GRU."""
    from torch_geometric.nn import GatedGraphConv as PygGatedGraphConv

    graph = _random_graph(30, 120, 1, 30, 3)
    torch.manual_seed(0)
    ours = GGNNConv(16, 4, 1).double()
    theirs = PygGatedGraphConv(16, 4, aggr="add").double()
    with torch.no_grad():
        ours.bias.zero_()
        theirs.weight.copy_(ours.weight[0].expand(4, 16, 16))
        theirs.rnn.load_state_dict(ours.gru.state_dict())
    x = torch.randn(30, 11, dtype=torch.float64)
    expected = theirs(x, torch.stack([graph.src, graph.dst]))
    assert torch.allclose(ours(x, Graph(graph.src, graph.dst, 30)), expected, atol=1e-12)
