"""Graph and GraphBatch: construction, validation, formats, derived graphs, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import Graph, GraphBatch, GraphError


@st.composite
def graphs(draw, max_nodes: int = 12, max_edges: int = 30, typed: bool | None = None):
    """Random multigraphs with self-loops, isolated nodes and optional data; may be empty."""
    num_nodes = draw(st.integers(0, max_nodes))
    num_edges = draw(st.integers(0, max_edges)) if num_nodes else 0
    ids = st.integers(0, max(num_nodes - 1, 0))
    src = draw(st.lists(ids, min_size=num_edges, max_size=num_edges))
    dst = draw(st.lists(ids, min_size=num_edges, max_size=num_edges))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    has_types = draw(st.booleans()) if typed is None else typed
    edge_type = torch.randint(0, 3, (num_edges,), generator=generator) if has_types else None
    return Graph(
        torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64), num_nodes,
        edge_type=edge_type,
        node_data={"x": torch.randn(num_nodes, 3, generator=generator)},
        edge_data={"w": torch.randn(num_edges, generator=generator)},
        graph_data={"y": torch.randn(2, generator=generator)})


def _dense(graph: Graph, values: torch.Tensor | None = None) -> torch.Tensor:
    """Dense [N, N] adjacency with entry (src, dst) summed over multi-edges."""
    dense = torch.zeros(graph.num_nodes, graph.num_nodes, dtype=torch.float64)
    weights = torch.ones(graph.num_edges, dtype=torch.float64) if values is None else values.double()
    dense.index_put_((graph.src, graph.dst), weights, accumulate=True)
    return dense


# ----------------------------------------------------------------------------- construction


def test_known_graph_formats():
    graph = Graph([0, 1, 2, 2], [1, 2, 0, 0], 4)
    rowptr, col, edge_ids = graph.csr()
    assert rowptr.tolist() == [0, 2, 3, 4, 4]  # node 3 is isolated
    assert col.tolist() == [2, 2, 0, 1]
    assert edge_ids.tolist() == [2, 3, 0, 1]
    colptr, row, edge_ids = graph.csc()
    assert colptr.tolist() == [0, 1, 2, 4, 4]
    assert row.tolist() == [1, 2, 0, 0]
    assert edge_ids.tolist() == [0, 1, 2, 3]
    assert graph.in_degrees().tolist() == [2, 1, 1, 0]
    assert graph.out_degrees().tolist() == [1, 1, 2, 0]


def test_inputs_from_lists_and_numpy():
    from_list = Graph([0, 1], [1, 0])
    from_numpy = Graph(np.array([0, 1], dtype=np.int32), np.array([1, 0], dtype=np.int32))
    assert from_list == from_numpy
    assert from_list.num_nodes == 2 and from_list.src.dtype == torch.int64
    assert Graph([], []).num_nodes == 0
    assert Graph([], [], 5).num_edges == 0


def test_immutable():
    graph = Graph([0], [1])
    with pytest.raises(AttributeError, match="immutable"):
        graph.num_nodes = 3
    with pytest.raises(TypeError):
        graph.node_data["x"] = torch.zeros(2)


@pytest.mark.parametrize("kwargs, message", [
    (dict(src=[0, 5], dst=[1, 1], num_nodes=3), r"src\[1\] = 5 is out of range"),
    (dict(src=[0, 1], dst=[1, -1], num_nodes=3), r"dst\[1\] = -1 is out of range"),
    (dict(src=[0.0, 1.0], dst=[1, 1]), "integer tensor"),
    (dict(src=[True], dst=[0]), "integer tensor"),
    (dict(src=[[0, 1]], dst=[[1, 0]]), "1-D"),
    (dict(src=[0, 1], dst=[1]), "equal length"),
    (dict(src=[0], dst=[1], num_nodes=-2), r"num_nodes must lie in \[0, 2\*\*63\), got -2"),
    (dict(src=[0], dst=[1], num_nodes=2.5), "num_nodes must be an int"),
    (dict(src=[0], dst=[1], edge_type=[-1]), r"edge_type\[0\] = -1 is negative"),
    (dict(src=[0], dst=[1], edge_type=[0, 1]), "edge_type has 2 entries for 1 edges"),
    (dict(src=[0], dst=[1], node_data={"x": torch.zeros(3)}), r"node_data\['x'\]: first dimension must be 2"),
    (dict(src=[0], dst=[1], edge_data={"w": torch.zeros(2)}), r"edge_data\['w'\]: first dimension must be 1"),
    (dict(src=[0], dst=[1], node_data={"x": torch.tensor([[0.0], [float("inf")]])}),
     r"non-finite value inf at index \(1, 0\)"),
    (dict(src=[0], dst=[1], graph_data={"y": torch.tensor(float("nan"))}), "non-finite"),
    (dict(src=[0], dst=[1], node_data={1: torch.zeros(2)}), "keys must be strings"),
    (dict(src="01", dst=[1]), "expected a tensor"),
])
def test_validation_names_the_problem(kwargs, message):
    with pytest.raises(GraphError, match=message):
        Graph(**kwargs)


def test_graph_error_is_value_error():
    assert issubclass(GraphError, ValueError)


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_validation_catches_every_corruption(graph, data):
    """Corrupting one id, type or feature value of a valid graph is always caught."""
    kind = data.draw(st.sampled_from(["src", "dst", "type", "feature"]))
    src, dst = graph.src.clone(), graph.dst.clone()
    edge_type = None if graph.edge_type is None else graph.edge_type.clone()
    x = graph.node_data["x"].clone()
    if kind in ("src", "dst") and graph.num_edges:
        position = data.draw(st.integers(0, graph.num_edges - 1))
        bad = data.draw(st.sampled_from([-1, graph.num_nodes, graph.num_nodes + 7]))
        (src if kind == "src" else dst)[position] = bad
        expected = rf"{kind}\[\d+\] = {bad} is out of range"
    elif kind == "type" and edge_type is not None and graph.num_edges:
        edge_type[data.draw(st.integers(0, graph.num_edges - 1))] = -3
        expected = "is negative"
    elif graph.num_nodes:
        x[data.draw(st.integers(0, graph.num_nodes - 1)), 1] = data.draw(
            st.sampled_from([float("nan"), float("inf"), float("-inf")]))
        expected = "non-finite"
    else:
        return
    with pytest.raises(GraphError, match=expected):
        Graph(src, dst, graph.num_nodes, edge_type=edge_type, node_data={"x": x})


# ----------------------------------------------------------------------------- formats


@settings(max_examples=80, deadline=None)
@given(graphs())
def test_csr_and_csc_round_trip_to_coo(graph):
    for index_dtype in (torch.int32, torch.int64):
        rowptr, col, edge_ids = graph.csr(index_dtype)
        assert rowptr.dtype == col.dtype == edge_ids.dtype == index_dtype
        rows = torch.repeat_interleave(torch.arange(graph.num_nodes), torch.diff(rowptr.long()))
        assert torch.equal(col.long(), graph.src[edge_ids.long()])
        assert torch.equal(rows, graph.dst[edge_ids.long()])
        assert sorted(edge_ids.tolist()) == list(range(graph.num_edges))
        # sources ascend within each destination row
        same_row = rows[1:] == rows[:-1]
        assert bool((col[1:].long()[same_row] >= col[:-1].long()[same_row]).all())
        colptr, row, edge_ids = graph.csc(index_dtype)
        sources = torch.repeat_interleave(torch.arange(graph.num_nodes), torch.diff(colptr.long()))
        assert torch.equal(sources, graph.src[edge_ids.long()])
        assert torch.equal(row.long(), graph.dst[edge_ids.long()])


def test_formats_are_cached_and_not_part_of_equality():
    graph = Graph([0, 1], [1, 0])
    assert graph.csr() is graph.csr()
    assert graph == Graph([0, 1], [1, 0])
    assert "cache" not in repr(graph)


def test_csr_rejects_bad_index_dtype():
    with pytest.raises(TypeError, match="index_dtype"):
        Graph([0], [1]).csr(torch.float32)


# ----------------------------------------------------------------------------- derived graphs


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_reverse_is_an_involution_and_swaps_formats(graph):
    reversed_graph = graph.reverse()
    assert reversed_graph.reverse() == graph
    assert torch.equal(_dense(reversed_graph), _dense(graph).T)
    graph.csr()
    for a, b in zip(graph.reverse().csc(), graph.csr()):
        assert torch.equal(a, b)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_self_loops(graph):
    without = graph.remove_self_loops()
    assert without.num_self_loops() == 0
    assert without.num_edges == graph.num_edges - graph.num_self_loops()
    kwargs = {"edge_type": 0} if graph.edge_type is not None else {}
    with_loops = without.add_self_loops(**kwargs)
    assert with_loops.num_edges == without.num_edges + graph.num_nodes
    assert torch.equal(_dense(with_loops), _dense(without) + torch.eye(graph.num_nodes, dtype=torch.float64))
    assert torch.equal(with_loops.edge_data["w"][without.num_edges:], torch.zeros(graph.num_nodes))


def test_add_self_loops_needs_a_type_on_typed_graphs():
    with pytest.raises(ValueError, match="edge_type="):
        Graph([0], [1], edge_type=[1]).add_self_loops()


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_to_undirected_is_symmetric_and_coalesced(graph):
    undirected = graph.to_undirected()
    dense = _dense(undirected)
    assert torch.equal(dense > 0, dense.T > 0)
    assert torch.equal(dense > 0, (_dense(graph) + _dense(graph).T) > 0)
    if undirected.edge_type is None and undirected.num_edges:
        assert int(dense.max()) == 1  # no duplicate pairs remain
    assert undirected.coalesce() == undirected
    assert graph.to_undirected(dedup=False).num_edges == 2 * graph.num_edges


def test_coalesce_keeps_first_occurrence_and_its_data():
    graph = Graph([0, 0, 1, 0], [1, 1, 0, 1], edge_data={"w": torch.tensor([1.0, 2.0, 3.0, 4.0])})
    merged = graph.coalesce()
    assert merged.src.tolist() == [0, 1] and merged.edge_data["w"].tolist() == [1.0, 3.0]
    typed = Graph([0, 0], [1, 1], edge_type=[0, 1])
    assert typed.coalesce().num_edges == 2  # different relations are different edges


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_subgraph_matches_dense_submatrix(graph, data):
    nodes = data.draw(st.lists(st.integers(0, max(graph.num_nodes - 1, 0)), unique=True,
                               max_size=graph.num_nodes)) if graph.num_nodes else []
    sub = graph.subgraph(torch.tensor(nodes, dtype=torch.int64))
    index = torch.tensor(nodes, dtype=torch.int64)
    assert torch.equal(_dense(sub.graph), _dense(graph)[index][:, index])
    assert torch.equal(sub.graph.node_data["x"], graph.node_data["x"][index])
    assert torch.equal(sub.graph.edge_data["w"], graph.edge_data["w"][sub.edge_ids])
    assert torch.equal(sub.node_ids, index)


def test_subgraph_rejects_repeats_and_range():
    graph = Graph([0, 1], [1, 2])
    with pytest.raises(GraphError, match="repeated"):
        graph.subgraph([1, 1])
    with pytest.raises(GraphError, match=r"nodes\[0\] = 7"):
        graph.subgraph([7])


@settings(max_examples=40, deadline=None)
@given(graphs(), st.integers(0, 2**31 - 1))
def test_reorder_nodes_is_a_relabelling(graph, seed):
    order = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    reordered = graph.reorder_nodes(order)
    assert torch.equal(_dense(reordered), _dense(graph)[order][:, order])
    inverse = torch.argsort(order)
    assert reordered.reorder_nodes(inverse) == graph


def test_with_data_validates():
    graph = Graph([0], [1])
    assert graph.with_node_data(x=torch.ones(2, 4)).node_data["x"].shape == (2, 4)
    with pytest.raises(GraphError, match="first dimension must be 1"):
        graph.with_edge_data(w=torch.ones(3))


def test_scipy_round_trip():
    graph = Graph([0, 1, 2], [1, 2, 0], 4)
    back = Graph.from_scipy(graph.to_scipy())
    assert torch.equal(_dense(back), _dense(graph))
    with pytest.raises(GraphError, match="square"):
        import scipy.sparse as sp

        Graph.from_scipy(sp.csr_matrix((2, 3)))


def test_repr_describes_data():
    graph = Graph([0], [1], node_data={"x": torch.zeros(2, 5)}, edge_type=[2])
    assert repr(graph) == ("Graph(num_nodes=2, num_edges=1, num_edge_types=3, "
                           "node_data={x: [2, 5] float32})")


# ----------------------------------------------------------------------------- batching


@settings(max_examples=60, deadline=None)
@given(st.lists(graphs(typed=False), max_size=6))
def test_batch_unbatch_identity(graph_list):
    batch = GraphBatch.from_graphs(graph_list)
    assert batch.num_graphs == len(graph_list)
    assert batch.num_nodes == sum(g.num_nodes for g in graph_list)
    assert batch.unbatch() == graph_list
    if graph_list:
        expected = torch.cat([torch.full((g.num_nodes,), i) for i, g in enumerate(graph_list)])
        assert torch.equal(batch.node_graph, expected)
        assert torch.equal(torch.block_diag(*[_dense(g) for g in graph_list]), _dense(batch))


@settings(max_examples=60, deadline=None)
@given(st.lists(graphs(typed=True), min_size=1, max_size=5), st.integers(1, 5), st.integers(0, 9),
       st.integers(1, 4))
def test_pad_unpad_identity(graph_list, extra_nodes, extra_edges, extra_graphs):
    batch = GraphBatch.from_graphs(graph_list)
    padded = batch.pad(batch.num_nodes + extra_nodes, batch.num_edges + extra_edges,
                       batch.num_graphs + extra_graphs)
    assert padded.num_nodes == batch.num_nodes + extra_nodes
    assert padded.num_edges == batch.num_edges + extra_edges
    assert padded.num_graphs == batch.num_graphs + extra_graphs
    assert int(padded.node_mask.sum()) == batch.num_nodes
    assert int(padded.edge_mask.sum()) == batch.num_edges
    # padding edges never touch a real node
    pad_edges = ~padded.edge_mask
    assert not bool(padded.node_mask[padded.src[pad_edges]].any())
    assert not bool(padded.node_mask[padded.dst[pad_edges]].any())
    assert padded.unpad() == batch
    assert padded.unbatch() == graph_list


def test_pad_needs_room():
    batch = GraphBatch.from_graphs([Graph([0], [1])])
    with pytest.raises(ValueError, match="does not fit"):
        batch.pad(2, 1, 2)  # no node left for the padding graph
    with pytest.raises(ValueError, match="does not fit"):
        batch.pad(3, 1, 1)  # no graph slot left for it


def test_batch_rejects_mismatched_graphs():
    a = Graph([0], [1], node_data={"x": torch.zeros(2, 3)})
    with pytest.raises(GraphError, match=r"graphs\[1\].node_data has keys"):
        GraphBatch.from_graphs([a, Graph([0], [1])])
    with pytest.raises(GraphError, match=r"graphs\[1\].node_data\['x'\] is \[2, 4\]"):
        GraphBatch.from_graphs([a, Graph([0], [1], node_data={"x": torch.zeros(2, 4)})])
    with pytest.raises(GraphError, match="edge_type"):
        GraphBatch.from_graphs([Graph([0], [1], edge_type=[0]), Graph([0], [1])])
    with pytest.raises(GraphError, match="already a GraphBatch"):
        GraphBatch.from_graphs([GraphBatch.from_graphs([a])])
    with pytest.raises(GraphError, match="not a Graph"):
        GraphBatch.from_graphs([a, "b"])
    with pytest.raises(TypeError, match="from_graphs"):
        GraphBatch([0], [1])


def test_empty_batch():
    batch = GraphBatch.from_graphs([])
    assert batch.num_graphs == 0 and batch.num_nodes == 0 and batch.unbatch() == []


def test_graph_data_is_stacked():
    graphs_ = [Graph([0], [1], graph_data={"y": torch.tensor([float(i), 1.0])}) for i in range(3)]
    batch = GraphBatch.from_graphs(graphs_)
    assert batch.graph_data["y"].shape == (3, 2)
    assert batch.graph_sizes().tolist() == [[2, 1]] * 3


# ----------------------------------------------------------------------------- PyG interop

torch_geometric = pytest.importorskip("torch_geometric", reason="the pyg extra is not installed")


@settings(max_examples=30, deadline=None)
@given(graphs(max_nodes=8, max_edges=12))
def test_pyg_round_trip(graph):
    data = graph.to_pyg()
    assert torch.equal(data.edge_index, torch.stack([graph.src, graph.dst]))
    # PyG guesses levels from sizes, which is ambiguous on tiny graphs: name them.
    assert Graph.from_pyg(data, levels={"x": "node", "w": "edge", "y": "graph"}) == graph


def test_pyg_guesses_levels_when_unambiguous():
    graph = Graph([0, 1, 2], [1, 2, 0], 4, node_data={"x": torch.randn(4, 2)},
                  edge_data={"edge_attr": torch.randn(3, 5)}, graph_data={"y": torch.tensor([1.0])})
    assert Graph.from_pyg(graph.to_pyg()) == graph
    with pytest.raises(ValueError, match="levels"):
        Graph.from_pyg(graph.to_pyg(), levels={"x": "vertex"})


def test_pyg_batch_round_trip():
    graph_list = [Graph([0, 1, 1], [1, 0, 1], node_data={"x": torch.randn(2, 3)},
                        edge_data={"edge_attr": torch.randn(3, 2)}, graph_data={"y": torch.tensor([i])})
                  for i in range(4)]
    batch = GraphBatch.from_graphs(graph_list)
    pyg_batch = batch.to_pyg()
    assert pyg_batch.num_graphs == 4
    assert GraphBatch.from_pyg(pyg_batch) == batch


# ----------------------------------------------------------------------------- relation views


@settings(max_examples=40, deadline=None)
@given(graphs(typed=True))
def test_by_relation_rows_are_destination_times_type(graph):
    types = graph.num_edge_types + 1
    view = graph.by_relation(types)
    assert view.num_src_nodes == graph.num_nodes
    assert view.num_dst_nodes == graph.num_nodes * types
    assert torch.equal(view.dst, graph.dst * types + graph.edge_type)
    rowptr, col, edge_ids = view.csr()
    rows = torch.repeat_interleave(torch.arange(view.num_dst_nodes), torch.diff(rowptr))
    assert torch.equal(col, view.src[edge_ids]) and torch.equal(rows, view.dst[edge_ids])
    colptr, row, edge_ids = view.csc(torch.int32)
    sources = torch.repeat_interleave(torch.arange(view.num_src_nodes), torch.diff(colptr.long()))
    assert torch.equal(sources, view.src[edge_ids.long()])
    assert graph.by_relation(types) is view  # cached


def test_by_relation_rejects_too_few_types():
    with pytest.raises(ValueError, match="num_edge_types=2"):
        Graph([0, 1], [1, 0], edge_type=[0, 2]).by_relation(2)


def test_moves_go_through_to_device_and_the_kernels_follow(monkeypatch):
    """`Graph.to`, `GraphBatch.to` and the pack collator's host arrays go through
    `_device.to_device` (pinned, non-blocking copies to a GPU), and the moved batch's
    kernels are chosen for its device. Spied on a CPU machine: the meta device stands in
    for a GPU."""
    from gnnforge import _device
    from gnnforge.ops import _dispatch
    from gnnforge.packing import PackCollator

    monkeypatch.delenv("GNNFORGE_BACKEND", raising=False)
    generator = torch.Generator().manual_seed(0)
    parts = [Graph(torch.randint(0, 4, (6,), generator=generator),
                   torch.randint(0, 4, (6,), generator=generator), 4,
                   edge_type=torch.randint(0, 2, (6,), generator=generator),
                   node_data={"x": torch.randn(4, 2, generator=generator)},
                   edge_data={"w": torch.randn(6, generator=generator)},
                   graph_data={"y": torch.randn(1, generator=generator)}) for _ in range(3)]
    batch = GraphBatch.from_graphs(parts).pad(16, 20, 4)
    handed: list[torch.device] = []
    original = _device.to_device
    monkeypatch.setattr(_device, "to_device",
                        lambda tensor, device: handed.append(device) or original(tensor, device))
    meta = torch.device("meta")
    moved = batch.to("meta")
    tensors = [moved.src, moved.dst, moved.edge_type, moved.node_data["x"],
               moved.edge_data["w"], moved.graph_data["y"], moved.graph_ptr, moved.edge_ptr,
               moved.graph_mask]
    assert all(tensor.device == meta for tensor in tensors)
    assert handed == [meta] * len(tensors)
    default = _dispatch.DEFAULTS[("gspmm", "cpu")]
    assert _dispatch.choose("gspmm", batch.device).backend == default
    assert _dispatch.choose("gspmm", moved.device).backend == "reference"  # no table entry
    handed.clear()
    PackCollator(parts, (16, 20, 4))([2, 0])
    assert len(handed) >= 5 and set(handed) == {torch.device("cpu")}
