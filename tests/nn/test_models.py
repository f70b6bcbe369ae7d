"""MaskedBatchNorm1d equals BatchNorm1d on the real rows; MoleculeGIN and NodeClassifier
ignore padding and agree between a full graph and blocks."""

from __future__ import annotations

import math

import pytest
import torch

from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS
from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import MaskedBatchNorm1d, MoleculeGIN, NodeClassifier


def test_masked_batch_norm_equals_batch_norm_on_real_rows():
    generator = torch.Generator().manual_seed(0)
    ours, reference = MaskedBatchNorm1d(5), torch.nn.BatchNorm1d(5)
    for step in range(3):
        x = torch.randn(40, 5, generator=generator) * (step + 1)
        mask = torch.rand(40, generator=generator) < 0.7
        torch.testing.assert_close(ours(x, mask)[mask], reference(x[mask]))
    torch.testing.assert_close(ours.running_mean, reference.running_mean)
    torch.testing.assert_close(ours.running_var, reference.running_var)
    ours.eval(), reference.eval()
    x = torch.randn(8, 5, generator=generator)
    torch.testing.assert_close(ours(x, torch.ones(8, dtype=torch.bool)), reference(x))


def molecules(count: int, seed: int = 0) -> list[Graph]:
    generator = torch.Generator().manual_seed(seed)
    graphs = []
    for index in range(count):
        n = int(torch.randint(2, 9, (1,), generator=generator))
        src = torch.arange(n - 1)
        src, dst = torch.cat([src, src + 1]), torch.cat([src + 1, src])
        x = torch.stack([torch.randint(0, d, (n,), generator=generator)
                         for d in ATOM_FEATURE_DIMS], 1)
        e = torch.stack([torch.randint(0, d, (src.numel(),), generator=generator)
                         for d in BOND_FEATURE_DIMS], 1)
        graphs.append(Graph(src, dst, n, node_data={"x": x}, edge_data={"edge_attr": e},
                            graph_data={"y": torch.tensor([float(index)])}))
    return graphs


def test_molecule_gin_padding_never_changes_real_outputs():
    graphs = molecules(6)
    batch = GraphBatch.from_graphs(graphs)
    padded = batch.pad(batch.num_nodes + 7, batch.num_edges + 9, batch.num_graphs + 3)
    torch.manual_seed(0)
    model = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=16, num_layers=2)
    # Training mode: batch statistics come from real nodes only.
    torch.testing.assert_close(model(padded)[:6], model(batch), atol=1e-5, rtol=1e-5)
    model.eval()
    one_by_one = torch.cat([model(GraphBatch.from_graphs([g])) for g in graphs])
    torch.testing.assert_close(model(padded)[:6], one_by_one, atol=1e-5, rtol=1e-5)


def test_node_classifier_blocks_equal_full_graph_when_blocks_are_full():
    graph = Graph(
        torch.randint(0, 30, (120,), generator=torch.Generator().manual_seed(1)),
        torch.randint(0, 30, (120,), generator=torch.Generator().manual_seed(2)), 30)
    model = NodeClassifier(8, 16, 3, num_layers=2, dropout=0.0).eval()
    x = torch.randn(30, 8)
    full = model(graph, x)
    torch.testing.assert_close(model([graph, graph], x), full)


@pytest.mark.parametrize("sort_free", [True, False])
@pytest.mark.parametrize("sizes", [(3, 5, 2), ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, (1,),
                                   (70000, 90000, 80000, 60000)])
def test_feature_encoder_is_the_sum_of_column_embeddings(sizes, sort_free, monkeypatch):
    """Every path (a table of all combinations, the sort-free `embedding_sum` kernel on
    CPU; off it, distinct rows embedded once, one bag per row when no int64 code exists)
    against C lookups, with repeated rows."""
    from gnnforge.nn import FeatureEncoder, _molecule_gin

    if not sort_free:
        monkeypatch.setattr(_molecule_gin, "embedding_sum_available", lambda *_: False)
    torch.manual_seed(0)
    encoder = FeatureEncoder(sizes, 4).double()
    assert (encoder.combinations is not None) == (math.prod(sizes) <= 4096)
    assert (encoder.strides is not None) == (math.prod(sizes) < 2**62)
    generator = torch.Generator().manual_seed(1)
    for rows in (0, 1, 37, 200):
        features = torch.stack([torch.randint(0, min(v, 3 if rows == 200 else v), (rows,),
                                              generator=generator) for v in sizes], 1)
        upstream = torch.randn(rows, 4, generator=generator, dtype=torch.float64)
        (encoder(features) * upstream).sum().backward()
        fast = [e.weight.grad.clone() for e in encoder.embeddings]
        encoder.zero_grad()
        expected = sum(encoder.embeddings[c](features[:, c]) for c in range(len(sizes)))
        (expected * upstream).sum().backward()
        torch.testing.assert_close(encoder(features), expected)
        for grad, embedding in zip(fast, encoder.embeddings):
            torch.testing.assert_close(grad, embedding.weight.grad)
        encoder.zero_grad()


@pytest.mark.parametrize("sizes", [(3, 5, 2), ATOM_FEATURE_DIMS, (70000, 90000, 80000, 60000)])
def test_feature_encoder_rejects_out_of_range_values(sizes):
    from gnnforge.nn import FeatureEncoder

    encoder = FeatureEncoder(sizes, 4)
    features = torch.zeros(5, len(sizes), dtype=torch.int64)
    features[3, 1] = sizes[1]
    with pytest.raises(ValueError, match=r"features\[3, 1\].*outside column 1"):
        encoder(features)
    features[3, 1] = -1
    with pytest.raises(ValueError, match=r"features\[3, 1\] = -1"):
        encoder(features)


def test_masked_batch_norm_prefix_path_equals_general_path():
    """Padding after the real rows (packed batches) takes the fused kernel; values, the
    real rows' gradients and the running estimates equal the general masked path's."""
    generator = torch.Generator().manual_seed(1)
    fast, general = MaskedBatchNorm1d(6), MaskedBatchNorm1d(6)
    for real, total in ((30, 37), (12, 12), (2, 9)):
        x = torch.randn(total, 6, generator=generator, dtype=torch.float64) * 3 + 1
        prefix = torch.arange(total) < real
        shuffled = prefix[torch.randperm(total, generator=generator)]  # same count, no prefix
        order = torch.argsort(~shuffled, stable=True)                    # real rows first
        upstream = torch.randn(total, 6, generator=generator, dtype=torch.float64)
        fast, general = fast.double(), general.double()
        x_fast = x.clone().requires_grad_()
        x_general = x[order.argsort()].clone().requires_grad_()         # rows where shuffled
        out_fast = fast(x_fast, prefix)
        out_general = general(x_general, shuffled)
        torch.testing.assert_close(out_fast, out_general[order])
        (out_fast[prefix] * upstream[prefix]).sum().backward()
        (out_general[shuffled] * upstream[order.argsort()][shuffled]).sum().backward()
        torch.testing.assert_close(x_fast.grad, x_general.grad[order])
        for a, b in zip(fast.parameters(), general.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
            a.grad = b.grad = None
    torch.testing.assert_close(fast.running_mean, general.running_mean)
    torch.testing.assert_close(fast.running_var, general.running_var)
    assert int(fast.num_batches_tracked) == int(general.num_batches_tracked) == 3


def test_traced_masked_batch_norm_reduces_without_matrix_products():
    """Traced (torch.compile), the masked statistics are multiply-and-sum reductions that
    inductor fuses into its loops, not matrix-vector products (BLAS calls it cannot fuse:
    24 per step of the main job, 0.99x eager against 1.02x without); values, gradients and
    running estimates equal the eager masked path's."""
    import operator

    targets = []

    def record(graph_module, example_inputs):
        targets.extend(node.target for node in graph_module.graph.nodes)
        return graph_module

    generator = torch.Generator().manual_seed(3)
    eager, traced = MaskedBatchNorm1d(6).double(), MaskedBatchNorm1d(6).double()
    compiled = torch.compile(traced, fullgraph=True, dynamic=False, backend=record)
    for step in range(2):
        x = torch.randn(30, 6, generator=generator, dtype=torch.float64) * 3 + 1
        mask = torch.rand(30, generator=generator) < 0.7                 # not a prefix
        upstream = torch.randn(30, 6, generator=generator, dtype=torch.float64)
        x_eager, x_traced = x.clone().requires_grad_(), x.clone().requires_grad_()
        out_eager, out_traced = eager(x_eager, mask), compiled(x_traced, mask)
        torch.testing.assert_close(out_traced, out_eager)
        (out_eager * upstream).sum().backward()
        (out_traced * upstream).sum().backward()
        torch.testing.assert_close(x_traced.grad, x_eager.grad)
        for a, b in zip(traced.parameters(), eager.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    for a, b in zip(traced.buffers(), eager.buffers()):
        torch.testing.assert_close(a, b)
    products = {operator.matmul, torch.matmul, torch.mm, torch.mv, torch.Tensor.__matmul__}
    assert not products & set(targets), targets


def test_molecule_gin_joined_bond_lookup_equals_per_layer_encoders():
    graphs = molecules(5, seed=3)
    batch = GraphBatch.from_graphs(graphs).pad(60, 80, 7)
    torch.manual_seed(1)
    model = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=8, num_layers=3)
    edge_attr = batch.edge_data["edge_attr"]
    joined = model._bond_embeddings(edge_attr)
    upstream = [torch.randn_like(j) for j in joined]
    sum(((j * u).sum() for j, u in zip(joined, upstream))).backward()
    fast = [p.grad.clone() for p in model.bond_encoders.parameters()]
    model.zero_grad()
    separate = [bond(edge_attr) for bond in model.bond_encoders]
    sum(((s * u).sum() for s, u in zip(separate, upstream))).backward()
    for a, b in zip(joined, separate):
        torch.testing.assert_close(a, b)
    for a, p in zip(fast, model.bond_encoders.parameters()):
        torch.testing.assert_close(a, p.grad)


def test_node_classifier_training_forward_is_dropout_relu_in_order():
    """The fused relu + dropout between layers draws what the unfused layers would."""
    import torch.nn.functional as F

    from gnnforge import ops
    from gnnforge.data import rmat
    from gnnforge.nn import NodeClassifier

    graph = rmat(7, 600, seed=3)
    x = torch.randn(graph.num_nodes, 8)
    torch.manual_seed(0)
    model = NodeClassifier(8, 16, 3, num_layers=3, dropout=0.3).train()
    torch.manual_seed(5)
    out = model(graph, x)
    torch.manual_seed(5)
    h = x
    for layer, conv in enumerate(model.convs):
        h = conv(graph, ops.dropout(h, 0.3))
        if layer < 2:
            h = F.relu(h)
    torch.testing.assert_close(out, h, rtol=0, atol=0)
