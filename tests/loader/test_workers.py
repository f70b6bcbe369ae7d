"""What a loader yields crosses process boundaries: every graph type pickles to an equal
object (plain pickle and torch's shared-memory reductions), `DataLoader(num_workers=2)`
yields the batches `num_workers=0` does with fork and spawn, and a failing worker raises
in the main process instead of hanging. Each test that starts workers runs under a
timeout, and every DataLoader with workers has its own `timeout=` so a lost batch fails.
"""

from __future__ import annotations

import pickle
from dataclasses import fields
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torch.multiprocessing  # noqa: F401  # registers torch's shared-memory reductions
from gnnforge.data import random_molecule_like
from gnnforge.graph import BipartiteGraph, Graph, GraphBatch
from gnnforge.loader import DataLoader, PackedLoader, PackSampler, collate_graphs
from gnnforge.packing import StaticBatch
from gnnforge.sampling import Block, NeighborSampler
from gnnforge._worker_send import check_sendable
from tests._timeouts import SPAWN_TIMEOUT_S

# A lost batch would block forever; DataLoader's own timeout turns that into an error.
_BATCH_TIMEOUT_S = SPAWN_TIMEOUT_S / 2


def _random_graph(seed: int, typed: bool, num_nodes: int, num_edges: int) -> Graph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, max(num_nodes, 1), num_edges) if num_nodes else np.zeros(0, int)
    dst = rng.integers(0, max(num_nodes, 1), num_edges) if num_nodes else np.zeros(0, int)
    return Graph(src, dst, num_nodes,
                 edge_type=rng.integers(0, 3, src.size) if typed else None,
                 node_data={"x": torch.from_numpy(rng.normal(size=(num_nodes, 4)))},
                 edge_data={"w": torch.from_numpy(rng.random(src.size)).float()},
                 graph_data={"y": torch.tensor([float(seed)])})


@st.composite
def graph_lists(draw) -> list[Graph]:
    typed = draw(st.booleans())
    count = draw(st.integers(1, 5))
    sizes = [(draw(st.integers(0, 12)), draw(st.integers(0, 30))) for _ in range(count)]
    return [_random_graph(draw(st.integers(0, 2**16)), typed, n, e if n else 0)
            for n, e in sizes]


def _fork_pickle(value):
    """A round trip through torch's reductions (tensors move to shared memory)."""
    return ForkingPickler.loads(bytes(ForkingPickler.dumps(value)))


def _plain_pickle(value):
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _fields_equal(a, b) -> bool:
    """Field-by-field equality for the dataclass batch types (StaticBatch, Block)."""
    if type(a) is not type(b):
        return False
    for field in fields(a):
        if field.name == "_cache":
            continue
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, dict):
            if x.keys() != y.keys() or not all(torch.equal(x[k], y[k]) for k in x):
                return False
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if x is None or y is None or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("round_trip", [_plain_pickle, _fork_pickle], ids=["pickle", "torch"])
@settings(max_examples=25, deadline=None)
@given(graphs=graph_lists())
def test_graphs_batches_and_packs_pickle_to_equal_objects(round_trip, graphs):
    graph = graphs[0]
    graph.csr()  # a derived format travels along and stays equal to a fresh one
    copy = round_trip(graph)
    assert copy == graph and type(copy) is Graph
    assert all(torch.equal(a, b) for a, b in zip(copy.csr(), graph.csr(), strict=True))
    with pytest.raises(AttributeError, match="immutable"):
        copy.num_nodes = 3
    batch = GraphBatch.from_graphs(graphs)
    assert round_trip(batch) == batch
    assert round_trip(batch).unbatch() == graphs
    padded = batch.pad(batch.num_nodes + 2, batch.num_edges + 3, batch.num_graphs + 1)
    assert round_trip(padded) == padded
    static = StaticBatch.from_batch(padded)
    assert _fields_equal(round_trip(static), static)
    relations = graph.by_relation()
    copy = round_trip(relations)
    assert isinstance(copy, BipartiteGraph)
    assert torch.equal(copy.src, relations.src) and torch.equal(copy.dst, relations.dst)
    assert (copy.num_src_nodes, copy.num_dst_nodes) == (relations.num_src_nodes,
                                                        relations.num_dst_nodes)


@pytest.mark.parametrize("round_trip", [_plain_pickle, _fork_pickle], ids=["pickle", "torch"])
def test_sampled_blocks_pickle_to_equal_blocks(round_trip):
    graph = _random_graph(3, False, 60, 400)
    blocks = NeighborSampler([4, 3]).sample(graph, torch.arange(10),
                                            generator=torch.Generator().manual_seed(0))
    blocks[0].csc()
    copies = round_trip(blocks)
    assert len(copies) == 2 and all(isinstance(b, Block) for b in copies)
    assert all(_fields_equal(a, b) for a, b in zip(copies, blocks, strict=True))


def test_packed_batches_pickle_to_equal_batches():
    graphs = random_molecule_like(60, mean_atoms=8, max_atoms=20, seed=1)
    loader = PackedLoader(graphs, max_graphs_per_pack=8, seed=0)
    for batch in loader:
        assert _plain_pickle(batch) == batch
        assert _fork_pickle(batch) == batch


def test_pin_memory_pins_every_tensor(monkeypatch):
    """torch's pin_memory thread calls `pin_memory()` on what a worker returns; here
    Tensor.pin_memory is replaced (no GPU needed) to see that every tensor goes through it."""
    pinned = []

    def fake_pin(tensor, *args, **kwargs):
        pinned.append(tensor.data_ptr())
        return tensor.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    batch = GraphBatch.from_graphs([_random_graph(1, True, 5, 9), _random_graph(2, True, 4, 6)])
    batch.csr()
    copy = batch.pin_memory()
    assert copy == batch and type(copy) is GraphBatch
    # src, dst, edge_type, x, w, y, graph_ptr, edge_ptr, graph_mask and the three CSR arrays
    assert len(pinned) == 12
    assert copy.src.data_ptr() != batch.src.data_ptr()
    blocks = NeighborSampler([2]).sample(_random_graph(3, False, 20, 60), torch.arange(4),
                                         generator=torch.Generator().manual_seed(0))
    assert _fields_equal(blocks[0].pin_memory(), blocks[0])


def _tags(batches) -> list[list[int]]:
    return [[int(g.graph_data["tag"]) for g in b.unbatch()] for b in batches]


@pytest.fixture(scope="module")
def molecules() -> list[Graph]:
    graphs = random_molecule_like(10_000, mean_atoms=8, max_atoms=20, seed=0)
    return [g.with_graph_data(tag=torch.tensor(i)) for i, g in enumerate(graphs)]


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_workers_yield_the_batches_of_the_main_process(molecules):
    def batches(workers):
        return list(DataLoader(molecules, batch_size=64, shuffle=True, num_workers=workers,
                               generator=torch.Generator().manual_seed(5),
                               timeout=_BATCH_TIMEOUT_S if workers else 0))

    expected = batches(0)
    got = batches(2)
    assert len(got) == len(expected) == 157
    assert all(a == b for a, b in zip(got, expected, strict=True))


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.filterwarnings("ignore:.pin_memory. argument is set as true")
def test_workers_with_each_start_method_and_persistent_workers(molecules, context):
    graphs = molecules[:200]
    expected = list(DataLoader(graphs, batch_size=16))
    loader = DataLoader(graphs, batch_size=16, num_workers=2, multiprocessing_context=context,
                        persistent_workers=True, pin_memory=True, timeout=_BATCH_TIMEOUT_S)
    for _ in range(2):  # the second epoch reuses the same worker processes
        got = list(loader)
        assert all(a == b for a, b in zip(got, expected, strict=True))
        assert len(got) == len(expected)


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_pack_sampler_with_workers_gives_the_same_packs(molecules):
    graphs = molecules[:400]
    sampler = PackSampler(graphs, max_graphs_per_pack=16, seed=2)
    expected = list(torch.utils.data.DataLoader(graphs, batch_sampler=sampler,
                                                collate_fn=sampler.collate))
    sampler.set_epoch(0)
    got = list(torch.utils.data.DataLoader(graphs, batch_sampler=sampler,
                                           collate_fn=sampler.collate, num_workers=2,
                                           timeout=_BATCH_TIMEOUT_S))
    assert _tags(got) == _tags(expected)
    assert all(a == b for a, b in zip(got, expected, strict=True))


class _Failing(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int):
        if index == 5:
            raise RuntimeError("graph 5 is broken")
        return _random_graph(index, False, 3, 2)


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_a_failing_worker_raises_in_the_main_process():
    loader = DataLoader(_Failing(), batch_size=2, num_workers=2, timeout=_BATCH_TIMEOUT_S)
    with pytest.raises(RuntimeError, match="graph 5 is broken"):
        list(loader)
    loader = DataLoader(["not a graph"] * 4, batch_size=2, num_workers=2,
                        timeout=_BATCH_TIMEOUT_S)
    with pytest.raises(TypeError, match="item 0 of the batch is a str"):
        list(loader)


class _Unsendable(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int):
        return check_sendable(lambda: index, "the test item")


@pytest.mark.timeout(SPAWN_TIMEOUT_S)
def test_an_unsendable_batch_raises_in_the_main_process_not_a_hang():
    loader = torch.utils.data.DataLoader(_Unsendable(), batch_size=None, num_workers=2,
                                         timeout=_BATCH_TIMEOUT_S)
    with pytest.raises(TypeError, match="the test item: a DataLoader worker cannot send its "
                                        "function"):
        list(loader)


def test_the_send_check_is_free_outside_workers():
    item = lambda: 0  # noqa: E731
    assert check_sendable(item, "anything") is item
    # In the main process nothing is pickled, so a batch needs no probe.
    assert isinstance(collate_graphs([_random_graph(0, False, 2, 1)]), GraphBatch)
