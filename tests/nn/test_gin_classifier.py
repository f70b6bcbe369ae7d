"""GINClassifier (Xu et al.'s GIN-0) against a dense reference on random small graphs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import GINClassifier


def _random_graphs(seed: int, count: int, labels: int) -> list[Graph]:
    generator = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        n = int(torch.randint(1, 9, (1,), generator=generator))
        e = int(torch.randint(0, 3 * n, (1,), generator=generator))
        src = torch.randint(0, n, (e,), generator=generator)
        dst = torch.randint(0, n, (e,), generator=generator)
        x = torch.stack([torch.randint(0, labels, (n,), generator=generator),
                         torch.randint(0, 5, (n,), generator=generator)], dim=1)
        graphs.append(Graph(src, dst, n).with_node_data(x=x))
    return graphs


def _reference(model: GINClassifier, graphs: list[Graph]) -> torch.Tensor:
    """Dense GIN-0 in eval mode: h <- ReLU(BN(MLP((A + I) h))) with A[v, u] = number of
    edges u -> v, scores = sum over layers of Linear_l(sum over the graph's nodes of h^l)."""
    out = []
    for graph in graphs:
        n = graph.num_nodes
        adjacency = torch.zeros(n, n).index_put_((graph.dst, graph.src), torch.ones(
            graph.num_edges), accumulate=True) + torch.eye(n)                 # [n, n]
        h = F.one_hot(graph.node_data["x"][:, 0], model.num_node_labels).float()
        layers = [h]
        for mlp, norm in zip(model.mlps, model.norms):
            inner = mlp.lin2(F.relu(mlp.norm(mlp.lin1(adjacency @ h))))
            h = F.relu(norm(inner))
            layers.append(h)
        out.append(sum(head(layer.sum(0)) for head, layer in zip(model.heads, layers)))
    return torch.stack(out)


def _randomised(model: GINClassifier, seed: int) -> GINClassifier:
    """Non-trivial batch-norm running statistics, so eval mode is not the identity."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator))
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
    return model.eval()


@pytest.mark.parametrize("seed", range(4))
def test_equals_dense_reference(seed: int) -> None:
    torch.manual_seed(seed)
    graphs = _random_graphs(seed, 5, labels=4)
    model = _randomised(GINClassifier(4, hidden=8, num_layers=3, num_classes=3), seed)
    scores = model(GraphBatch.from_graphs(graphs))
    assert scores.shape == (5, 3)
    torch.testing.assert_close(scores, _reference(model, graphs), rtol=1e-5, atol=1e-5)


def test_padded_batch_gives_the_same_scores() -> None:
    torch.manual_seed(0)
    graphs = _random_graphs(1, 4, labels=3)
    model = _randomised(GINClassifier(3, hidden=6, num_layers=2, num_classes=2), 1)
    batch = GraphBatch.from_graphs(graphs)
    padded = batch.pad(batch.num_nodes + 5, batch.num_edges + 3, batch.num_graphs + 2)
    torch.testing.assert_close(model(padded)[:4], model(batch))


def test_padding_leaves_training_batch_norm_statistics_alone() -> None:
    torch.manual_seed(0)
    graphs = _random_graphs(2, 4, labels=3)
    model = GINClassifier(3, hidden=6, num_layers=2, num_classes=2, dropout=0.0)
    padded_model = GINClassifier(3, hidden=6, num_layers=2, num_classes=2, dropout=0.0)
    padded_model.load_state_dict(model.state_dict())
    batch = GraphBatch.from_graphs(graphs)
    padded = batch.pad(batch.num_nodes + 7, batch.num_edges, batch.num_graphs + 1)
    torch.testing.assert_close(padded_model(padded)[:4], model(batch))
    torch.testing.assert_close(padded_model.norms[0].running_mean, model.norms[0].running_mean)


def test_scores_are_the_sum_over_layers() -> None:
    """Zeroing every head but layer l's leaves layer l's term; the terms add up."""
    torch.manual_seed(3)
    graphs = _random_graphs(3, 3, labels=2)
    model = _randomised(GINClassifier(2, hidden=4, num_layers=2, num_classes=2), 3)
    batch = GraphBatch.from_graphs(graphs)
    total = model(batch)
    terms = []
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for keep in range(3):
        with torch.no_grad():
            for index, head in enumerate(model.heads):
                if index != keep:
                    head.weight.zero_()
                    head.bias.zero_()
        terms.append(model(batch))
        model.load_state_dict(state)
    torch.testing.assert_close(sum(terms), total)
    # The input layer's term is Linear_0 of the per-graph label counts.
    counts = torch.stack([F.one_hot(g.node_data["x"][:, 0], 2).sum(0).float() for g in graphs])
    torch.testing.assert_close(terms[0], model.heads[0](counts))


def test_eps_is_fixed_at_zero() -> None:
    model = GINClassifier(3, hidden=4, num_layers=2)
    assert all(float(conv.eps) == 0.0 for conv in model.convs)
    assert not any("eps" in name for name, _ in model.named_parameters())


def test_dropout_acts_in_training_only() -> None:
    torch.manual_seed(0)
    batch = GraphBatch.from_graphs(_random_graphs(4, 6, labels=3))
    model = GINClassifier(3, hidden=4, num_layers=2, dropout=0.5).eval()
    torch.testing.assert_close(model(batch), model(batch))
    model.train()
    torch.manual_seed(1)
    first = model(batch)
    torch.manual_seed(2)
    assert not torch.equal(first, model(batch))


def test_mean_pool() -> None:
    torch.manual_seed(0)
    graphs = _random_graphs(5, 3, labels=2)
    model = _randomised(GINClassifier(2, hidden=4, num_layers=1, pool="mean"), 5)
    counts = torch.stack([F.one_hot(g.node_data["x"][:, 0], 2).float().mean(0) for g in graphs])
    with torch.no_grad():
        model.heads[1].weight.zero_()
        model.heads[1].bias.zero_()
    torch.testing.assert_close(model(GraphBatch.from_graphs(graphs)), model.heads[0](counts))


@pytest.mark.parametrize("kwargs, message", [
    ({"num_node_labels": 0}, "num_node_labels must be >= 1, got 0"),
    ({"num_node_labels": 3, "hidden": 0}, "hidden must be >= 1, got 0"),
    ({"num_node_labels": 3, "num_layers": 0}, "num_layers must be >= 1, got 0"),
    ({"num_node_labels": 3, "pool": "max"}, "pool must be one of"),
    ({"num_node_labels": 3, "dropout": 1.0}, "dropout must lie in"),
])
def test_bad_arguments(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        GINClassifier(**kwargs)


def test_label_out_of_range_names_the_node() -> None:
    graph = Graph(torch.tensor([0]), torch.tensor([1]), 3).with_node_data(
        x=torch.tensor([[0, 0], [1, 0], [5, 0]]))
    model = GINClassifier(3, hidden=4, num_layers=1)
    with pytest.raises(ValueError, match="node 2 has label 5, outside"):
        model(GraphBatch.from_graphs([graph]))
    with pytest.raises(ValueError, match="node 2 has label 5"):
        model.check_inputs(GraphBatch.from_graphs([graph]))


def test_float_features_are_refused() -> None:
    graph = Graph(torch.tensor([0]), torch.tensor([1]), 2).with_node_data(x=torch.zeros(2, 1))
    with pytest.raises(ValueError, match=r"expected node_data\['x'\] as \[N, K >= 1\] int64"):
        GINClassifier(2)(GraphBatch.from_graphs([graph]))
