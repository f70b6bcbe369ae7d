"""SAGEConv, GINConv, GINEConv and RGCNConv equal PyG's layers for the same weights, on a
full Graph, a padded GraphBatch and a bipartite block, with empty graphs, isolated nodes,
self-loops and multi-edges."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn import GINConv, GINEConv, RGCNConv, SAGEConv

pyg = pytest.importorskip("torch_geometric.nn")

ATOL = 1e-5


def random_graph(seed: int, num_nodes: int, num_edges: int, num_types: int = 1) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_nodes, 1), (num_edges,), generator=generator)
    dst = torch.randint(0, max(num_nodes, 1), (num_edges,), generator=generator)
    if num_nodes > 3 and num_edges > 3:
        src[:2], dst[:2] = 1, 1                # a duplicated self-loop
        src[2], dst[2] = 0, 2                  # with a duplicate below
        src[3], dst[3] = 0, 2
        keep = (src != num_nodes - 1) & (dst != num_nodes - 1)  # node N-1 isolated
        src, dst = src[keep], dst[keep]
    types = torch.randint(0, num_types, (src.numel(),), generator=generator)
    return Graph(src, dst, num_nodes, edge_type=types)


GRAPHS = [(0, 0, 0), (1, 1, 0), (2, 7, 20), (3, 30, 120)]


class Block:
    """A minimal bipartite block: dst nodes are the first num_dst src nodes."""

    def __init__(self, src, dst, num_src, num_dst):
        self._graph = Graph(src, dst, num_src)
        self.num_src_nodes, self.num_dst_nodes = num_src, num_dst
        self.num_edges = src.numel()

    def coo(self):
        return self._graph.coo()

    def csr(self, index_dtype=torch.int64):
        rowptr, col, ids = self._graph.csr(index_dtype)
        return rowptr[: self.num_dst_nodes + 1], col, ids

    def csc(self, index_dtype=torch.int64):
        return self._graph.csc(index_dtype)


def random_block(seed: int, num_src: int = 12, num_dst: int = 5, num_edges: int = 30):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=generator)
    dst = torch.sort(torch.randint(0, num_dst - 1, (num_edges,), generator=generator)).values
    return Block(src, dst, num_src, num_dst), torch.stack([src, dst])


def edge_index(graph: Graph) -> torch.Tensor:
    return torch.stack([graph.src, graph.dst])


def features(seed: int, rows: int, width: int) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("options", [dict(), dict(normalize=True), dict(root_weight=False),
                                     dict(bias=False)])
@pytest.mark.parametrize("widths", [(6, 4), (4, 6)])
def test_sage_equals_pyg(shape, aggr, options, widths):
    graph = random_graph(*shape)
    ours = SAGEConv(*widths, aggr=aggr, **options)
    theirs = pyg.SAGEConv(*widths, aggr=aggr, **options)
    theirs.load_state_dict(ours.state_dict())
    x = features(shape[0], graph.num_nodes, widths[0])
    torch.testing.assert_close(ours(graph, x), theirs(x, edge_index(graph)), atol=ATOL, rtol=0)


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_sage_block_equals_pyg_bipartite(aggr):
    block, index = random_block(4)
    ours = SAGEConv(5, 3, aggr=aggr)
    theirs = pyg.SAGEConv(5, 3, aggr=aggr)
    theirs.load_state_dict(ours.state_dict())
    x = features(4, block.num_src_nodes, 5)
    out = ours(block, x)
    assert out.shape == (block.num_dst_nodes, 3)
    expected = theirs((x, x[: block.num_dst_nodes]), index, size=(12, 5))
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)


def mlp(width_in: int, width_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(width_in, 8), torch.nn.ReLU(),
                               torch.nn.Linear(8, width_out))


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("train_eps", [False, True])
def test_gin_equals_pyg(shape, train_eps):
    graph = random_graph(*shape)
    ours = GINConv(mlp(5, 3), eps=0.3, train_eps=train_eps)
    theirs = pyg.GINConv(mlp(5, 3), eps=0.3, train_eps=train_eps)
    theirs.load_state_dict(ours.state_dict())
    x = features(shape[0], graph.num_nodes, 5)
    torch.testing.assert_close(ours(graph, x), theirs(x, edge_index(graph)), atol=ATOL, rtol=0)


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_gine_equals_pyg(shape, edge_dim):
    graph = random_graph(*shape)
    ours = GINEConv(mlp(5, 3), eps=-0.2, train_eps=True, edge_dim=edge_dim)
    theirs = pyg.GINEConv(mlp(5, 3), eps=-0.2, train_eps=True, edge_dim=edge_dim)
    theirs.load_state_dict(ours.state_dict())
    x = features(shape[0], graph.num_nodes, 5)
    edge_attr = features(shape[0] + 1, graph.num_edges, edge_dim or 5)
    torch.testing.assert_close(ours(graph, x, edge_attr),
                               theirs(x, edge_index(graph), edge_attr), atol=ATOL, rtol=0)


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("decomposition", [{}, {"num_bases": 2}, {"num_blocks": 2}])
@pytest.mark.parametrize("widths", [(6, 4), (4, 6)])
def test_rgcn_equals_pyg(shape, aggr, decomposition, widths):
    graph = random_graph(*shape, num_types=3)
    ours = RGCNConv(*widths, num_relations=3, aggr=aggr, **decomposition)
    theirs = pyg.RGCNConv(*widths, num_relations=3, aggr=aggr, **decomposition)
    theirs.load_state_dict(ours.state_dict())
    x = features(shape[0], graph.num_nodes, widths[0])
    expected = theirs(x, edge_index(graph), graph.edge_type)
    torch.testing.assert_close(ours(graph, x), expected, atol=ATOL, rtol=0)


def test_rgcn_gradients_equal_pyg():
    graph = random_graph(5, 20, 80, num_types=4)
    ours = RGCNConv(8, 3, num_relations=4, num_bases=2)
    theirs = pyg.RGCNConv(8, 3, num_relations=4, num_bases=2)
    theirs.load_state_dict(ours.state_dict())
    x = features(5, 20, 8)
    ours(graph, x).square().sum().backward()
    theirs(x, edge_index(graph), graph.edge_type).square().sum().backward()
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_layers_on_padded_batch_equal_unpadded():
    graphs = [random_graph(seed, 6 + seed, 14) for seed in range(3)]
    batch = GraphBatch.from_graphs(graphs)
    padded = batch.pad(batch.num_nodes + 5, batch.num_edges + 7, batch.num_graphs + 2)
    x = features(9, batch.num_nodes, 4)
    x_padded = torch.cat([x, features(10, 5, 4) * 100])  # padding rows must not leak
    edge_attr = features(11, batch.num_edges, 4)
    edge_attr_padded = torch.cat([edge_attr, features(12, 7, 4) * 100])
    n = batch.num_nodes
    for layer in (SAGEConv(4, 3, aggr="max"), GINConv(mlp(4, 3))):
        torch.testing.assert_close(layer(padded, x_padded)[:n], layer(batch, x))
    gine = GINEConv(mlp(4, 3))
    torch.testing.assert_close(gine(padded, x_padded, edge_attr_padded)[:n],
                               gine(batch, x, edge_attr))


def test_bad_inputs_name_the_problem():
    graph = random_graph(2, 7, 20)
    with pytest.raises(ValueError, match="aggr must be one of"):
        SAGEConv(3, 3, aggr="median")
    with pytest.raises(ValueError, match="x has 5 rows but the graph has 7"):
        SAGEConv(3, 3)(graph, torch.zeros(5, 3))
    with pytest.raises(ValueError, match="edge_attr has 3 rows"):
        GINEConv(mlp(3, 3))(graph, torch.zeros(7, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"edge_type\[\d+\] = 2 but num_relations=2"):
        RGCNConv(3, 3, num_relations=2)(random_graph(2, 7, 20, num_types=3), torch.zeros(7, 3))
    with pytest.raises(ValueError, match="no edge_type"):
        RGCNConv(3, 3, num_relations=2)(Graph([0], [1], 2), torch.zeros(2, 3))


@pytest.mark.parametrize("shape", GRAPHS[1:])
@pytest.mark.parametrize("layer", ["sage", "rgcn", "gin"])
def test_aggr_add_is_pygs_name_for_sum(shape, layer):
    graph = random_graph(*shape, num_types=2)
    x = features(shape[0], graph.num_nodes, 5)
    make = {
        "sage": lambda aggr: (SAGEConv(5, 3, aggr=aggr), pyg.SAGEConv(5, 3, aggr=aggr), ()),
        "rgcn": lambda aggr: (RGCNConv(5, 3, 2, aggr=aggr), pyg.RGCNConv(5, 3, 2, aggr=aggr),
                              (graph.edge_type,)),
        "gin": lambda aggr: (GINConv(mlp(5, 3), aggr=aggr), pyg.GINConv(mlp(5, 3), aggr=aggr),
                             ()),
    }[layer]
    ours, theirs, extra = make("add")
    theirs.load_state_dict(ours.state_dict())
    expected = theirs(x, edge_index(graph), *extra)
    torch.testing.assert_close(ours(graph, x), expected, atol=ATOL, rtol=0)
    summed, _, _ = make("sum")
    summed.load_state_dict(ours.state_dict())
    torch.testing.assert_close(summed(graph, x), ours(graph, x))


@pytest.mark.parametrize("gin_aggr", ["mean", "max"])
def test_gin_other_aggregators_equal_pyg(gin_aggr):
    graph = random_graph(3, 30, 120)
    ours, theirs = GINConv(mlp(5, 3), aggr=gin_aggr), pyg.GINConv(mlp(5, 3), aggr=gin_aggr)
    theirs.load_state_dict(ours.state_dict())
    x = features(3, 30, 5)
    torch.testing.assert_close(ours(graph, x), theirs(x, edge_index(graph)), atol=ATOL, rtol=0)


@pytest.mark.parametrize("widths", [(6, 4), (4, 6)])   # both evaluation orders
def test_rgcn_mean_is_exact_in_float64_after_float32(widths):
    graph = random_graph(3, 30, 120, num_types=3)
    ours = RGCNConv(*widths, num_relations=3, aggr="mean")
    theirs = pyg.RGCNConv(*widths, num_relations=3, aggr="mean")
    theirs.load_state_dict(ours.state_dict())
    x = features(3, 30, widths[0])
    ours(graph, x)                                  # caches its view in float32 first
    ours, theirs = ours.double(), theirs.double()
    expected = theirs(x.double(), edge_index(graph), graph.edge_type)
    torch.testing.assert_close(ours(graph, x.double()), expected, atol=1e-13, rtol=1e-12)


@pytest.mark.parametrize("shape", GRAPHS)
@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("options", [dict(), dict(root_weight=False, normalize=True)])
def test_sage_project_equals_pyg(shape, aggr, options):
    # PyG's project=True: x_j <- ReLU(lin(x_j)) before aggregating; the root reads raw x.
    graph = random_graph(*shape)
    ours = SAGEConv(6, 4, aggr=aggr, project=True, **options)
    theirs = pyg.SAGEConv(6, 4, aggr=aggr, project=True, **options)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = features(shape[0], graph.num_nodes, 6)
    mine, given = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out, expected = ours(graph, mine), theirs(given, edge_index(graph))
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(mine.grad, given.grad, atol=1e-4, rtol=1e-4)
    for (name, a), b in zip(ours.named_parameters(), [dict(theirs.named_parameters())[n]
                                                     for n, _ in ours.named_parameters()]):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_sage_project_on_a_block_and_sparse_input_equal_pyg():
    from gnnforge.nn import SparseFeatures

    block, index = random_block(7)
    ours = SAGEConv(6, 4, project=True)
    theirs = pyg.SAGEConv(6, 4, project=True)
    theirs.load_state_dict(ours.state_dict())
    x = features(7, block.num_src_nodes, 6)
    x[x < 0.5] = 0.0
    expected = theirs((x, x[:block.num_dst_nodes]), index,
                      size=(block.num_src_nodes, block.num_dst_nodes))
    torch.testing.assert_close(ours(block, x), expected, atol=ATOL, rtol=0)
    sparse = SparseFeatures.from_dense(x)
    torch.testing.assert_close(ours(block, sparse), expected, atol=ATOL, rtol=0)
    assert ours.plan_expression() is None and "project=True" in repr(ours)


@pytest.mark.parametrize("is_sorted", [False, True])
def test_rgcn_is_sorted_is_accepted_with_the_same_results(is_sorted):
    graph = random_graph(3, 30, 120, num_types=3)
    order = torch.argsort(graph.edge_type, stable=True)   # sorted by type, as PyG asks
    graph = Graph(graph.src[order], graph.dst[order], graph.num_nodes,
                  edge_type=graph.edge_type[order])
    ours = RGCNConv(6, 4, num_relations=3, is_sorted=is_sorted)
    theirs = pyg.RGCNConv(6, 4, num_relations=3, is_sorted=is_sorted)
    theirs.load_state_dict(ours.state_dict())
    x = features(3, graph.num_nodes, 6)
    expected = theirs(x, edge_index(graph), graph.edge_type)
    torch.testing.assert_close(ours(graph, x), expected, atol=ATOL, rtol=0)
    assert ours.is_sorted is is_sorted
