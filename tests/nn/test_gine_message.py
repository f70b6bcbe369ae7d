"""The fused GINE message kernel equals gather + add + ReLU + sum, values and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import _gine_message, _molecule_gin
from gnnforge.nn._gine_message import gine_message_sum


def _reference(graph, x, table, code, weight=None):
    rows = table if code is None else table.index_select(0, code)
    messages = F.relu(x.index_select(0, graph.src) + rows)
    out = x.new_zeros(graph.num_nodes, x.shape[1])
    out = out.index_add(0, graph.dst, messages)
    return out if weight is None else out + weight * x


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(0, 12), edges=st.integers(0, 40), width=st.integers(1, 5),
       rows=st.integers(1, 6), coded=st.booleans(), seed=st.integers(0, 2**16),
       weighted=st.sampled_from([None, 0.0, 1.7]))
def test_equals_reference(nodes, edges, width, rows, coded, seed, weighted) -> None:
    """Random multigraphs with self-loops and isolated nodes (and the empty graph)."""
    generator = torch.Generator().manual_seed(seed)
    edges = edges if nodes else 0
    graph = Graph(torch.randint(0, max(nodes, 1), (edges,), generator=generator),
                  torch.randint(0, max(nodes, 1), (edges,), generator=generator), nodes)
    x = torch.randn(nodes, width, generator=generator, dtype=torch.float64, requires_grad=True)
    table = torch.randn(rows if coded else edges, width, generator=generator,
                        dtype=torch.float64, requires_grad=True)
    code = torch.randint(0, rows, (edges,), generator=generator) if coded else None
    upstream = torch.randn(nodes, width, generator=generator, dtype=torch.float64)
    weight = (None if weighted is None
              else torch.tensor([weighted], dtype=torch.float64, requires_grad=True))
    inputs = (x, table) if weight is None else (x, table, weight)
    fast = gine_message_sum(graph, x, table, code, weight)
    grads = torch.autograd.grad((fast * upstream).sum(), inputs, allow_unused=True)
    slow = _reference(graph, x, table, code, weight)
    expected = torch.autograd.grad((slow * upstream).sum(), inputs, allow_unused=True)
    torch.testing.assert_close(fast, slow)
    for got, want, value in zip(grads, expected, inputs):
        torch.testing.assert_close(got, torch.zeros_like(value) if want is None else want)


def test_gradcheck() -> None:
    generator = torch.Generator().manual_seed(0)
    graph = Graph(torch.tensor([0, 1, 2, 2, 3]), torch.tensor([1, 1, 2, 0, 3]), 4)
    x = torch.randn(4, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    table = torch.randn(2, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    code = torch.tensor([0, 1, 1, 0, 1])
    weight = torch.tensor([1.3], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, w: gine_message_sum(graph, a, b, code, w),
                                    (x, table, weight))


def test_bad_inputs_raise() -> None:
    graph = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match="width"):
        gine_message_sum(graph, x, torch.randn(2, 4))
    with pytest.raises(ValueError, match="2 edges"):
        gine_message_sum(graph, x, torch.randn(3, 3))
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        gine_message_sum(graph, x, torch.randn(2, 3), torch.tensor([0, 2]))


def test_molecule_gin_fused_path_equals_unfused(monkeypatch) -> None:
    """MoleculeGIN on a padded batch: the fused bond-table path vs [E, D] embeddings."""
    pytest.importorskip("rdkit")
    from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, smiles_to_graph
    from gnnforge.nn import MoleculeGIN

    graphs = [smiles_to_graph(text) for text in
              ("CCO", "c1ccccc1O", "CC(=O)NC1=CC=C(O)C=C1", "C#N", "[Na+].[Cl-]", "C",
               "C1CC1C(F)(F)F", "O=S(=O)(O)c1ccc2ccccc2c1")]
    batch = GraphBatch.from_graphs(graphs)
    batch = batch.pad(batch.num_nodes + 5, batch.num_edges + 4, batch.num_graphs + 2)
    torch.manual_seed(0)
    model = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=8, num_layers=3).double()
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(_molecule_gin, "fused_gine_available", lambda *a: False)
        model.zero_grad()
        out = model(batch)
        (out * batch.graph_mask.unsqueeze(1)).sum().backward()
        results.append((out[batch.graph_mask], [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(results[0][0], results[1][0])
    for fast, slow in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(fast, slow)


def test_gine_conv_fused_path_equals_unfused(monkeypatch) -> None:
    from gnnforge.nn import GINEConv
    from gnnforge.nn import _gin_conv

    generator = torch.Generator().manual_seed(2)
    graph = Graph(torch.randint(0, 9, (30,), generator=generator),
                  torch.randint(0, 9, (30,), generator=generator), 10)
    conv = GINEConv(torch.nn.Linear(4, 4), train_eps=True, edge_dim=3).double()
    x = torch.randn(10, 4, generator=generator, dtype=torch.float64)
    edge_attr = torch.randn(30, 3, generator=generator, dtype=torch.float64)
    fast = conv(graph, x, edge_attr)
    assert _gine_message.fused_gine_available(x, x)
    monkeypatch.setattr(_gin_conv, "fused_gine_available", lambda *a: False)
    torch.testing.assert_close(fast, conv(graph, x, edge_attr))


def test_real_prefix_requires_edges_inside_the_prefix() -> None:
    from gnnforge.nn._molecule_gin import _real_prefix

    graphs = [Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2), Graph([], [], 1)]
    batch = GraphBatch.from_graphs(graphs).pad(5, 4, 4)
    assert _real_prefix(batch, batch.node_mask) == 3
    mask = batch.node_mask.clone()
    mask[2] = False                         # a prefix of 2, no edge into it from outside
    assert _real_prefix(batch, mask) == 2
    mask[1] = False                         # node 1 has an in-edge from node 0... and 0 from 1
    assert _real_prefix(batch, mask) is None
    mask = batch.node_mask.clone()
    mask[0] = False                         # not a prefix
    assert _real_prefix(batch, mask) is None


@pytest.mark.parametrize("backend", ["auto", "numba", "native"])
def test_a_graph_without_edges_has_a_zero_table_gradient(backend) -> None:
    # The native backward once left the table gradient as the pooled buffer's old bytes
    # when no edge wrote it (the hypothesis test above caught it now and then).
    import gnnforge.ops as ops
    from gnnforge.ops._native import available

    if backend == "native" and not available():
        pytest.skip("native kernels unavailable here")
    graph = Graph(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 5)
    for _ in range(3):   # pooled buffers are reused: check more than the first call
        x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        table = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
        with ops.use_backend(backend):
            out = gine_message_sum(graph, x, table, torch.zeros(0, dtype=torch.long), None)
            grad_x, grad_table = torch.autograd.grad((out * 2).sum(), (x, table))
        torch.testing.assert_close(grad_table, torch.zeros_like(table))
