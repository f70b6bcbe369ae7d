"""The samplers' thread split: the same picks on any thread count, and errors re-raised."""

import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.sampling import DependentKeys, InEdges, NeighborSampler
from gnnforge.sampling import _threads
from gnnforge.sampling._common import in_edges
from gnnforge.sampling._neighbor import neighbor_layer
from gnnforge.sampling._variates import draw_key

from .sampling_helpers import random_multigraph


@pytest.fixture
def split_every_item(monkeypatch):
    """Let any call split (the default needs 16k items per thread)."""
    monkeypatch.setattr(_threads, "MIN_ITEMS_PER_THREAD", 1)


def test_thread_count_follows_torch_and_the_work():
    assert _threads.sampler_threads(10**9, 3) == 3
    assert _threads.sampler_threads(10**9, 100) == _threads.MAX_THREADS
    assert _threads.sampler_threads(_threads.MIN_ITEMS_PER_THREAD * 2 - 1, 4) == 1
    assert _threads.sampler_threads(0, 4) == 1
    assert _threads.sampler_threads(10**9) == min(torch.get_num_threads(), _threads.MAX_THREADS)
    # off the main thread (a prefetcher beside the training loop's torch pool): one
    assert _threads.run_on_threads([lambda: 0, lambda: _threads.sampler_threads(10**9)]) \
        == [0, 1]
    assert _threads.run_on_threads([lambda: 0, lambda: _threads.sampler_threads(10**9, 3)]) \
        == [0, 3]


def test_run_on_threads_keeps_order_and_runs_the_calls_at_once():
    together = threading.Barrier(4, timeout=120)  # passes only when all four run at once

    def call(index):
        together.wait()
        return index, threading.get_ident()

    results = _threads.run_on_threads([lambda i=i: call(i) for i in range(4)])
    assert [index for index, _ in results] == [0, 1, 2, 3]
    assert results[0][1] == threading.get_ident()
    assert len({ident for _, ident in results}) == 4
    assert _threads.run_on_threads([]) == []


def test_run_on_threads_raises_the_first_error_after_all_finish():
    finished = []

    def fail(message):
        raise ValueError(message)

    calls = [lambda: finished.append(0), lambda: fail("one"), lambda: fail("two"),
             lambda: finished.append(3)]
    with pytest.raises(ValueError, match="one"):
        _threads.run_on_threads(calls)
    assert sorted(finished) == [0, 3]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), num_nodes=st.integers(1, 60), num_edges=st.integers(0, 400),
       fanout=st.sampled_from([-1, 1, 2, 5, 30]), replace=st.booleans(),
       dependent=st.booleans(), threads=st.integers(2, 5), stored_ids=st.booleans())
def test_neighbor_layer_same_picks_on_any_thread_count(seed, num_nodes, num_edges, fanout,
                                                      replace, dependent, threads, stored_ids):
    _threads_min = _threads.MIN_ITEMS_PER_THREAD
    _threads.MIN_ITEMS_PER_THREAD = 1  # hypothesis and function fixtures do not mix
    try:
        rng = np.random.default_rng(seed)
        # hubs: half the edges into the first few nodes, so counts differ across ranges
        dst = np.where(rng.random(num_edges) < 0.5, rng.integers(0, 3, num_edges),
                       rng.integers(0, num_nodes, num_edges)) % num_nodes
        graph = Graph(rng.integers(0, num_nodes, num_edges), dst, num_nodes)
        edges = in_edges(graph)
        if not stored_ids:  # the edge ids as CSR positions (no [E] array)
            edges = InEdges(edges.rowptr, edges.col, edges.col[:0], edges.num_nodes)
        frontier = rng.permutation(num_nodes)[: rng.integers(0, num_nodes + 1)]
        key = DependentKeys(3, seed=seed)[1] if dependent else \
            draw_key(torch.Generator().manual_seed(seed))
        one = neighbor_layer(edges, frontier, frontier, fanout, replace, key, threads=1)
        many = neighbor_layer(edges, frontier, frontier, fanout, replace, key, threads=threads)
    finally:
        _threads.MIN_ITEMS_PER_THREAD = _threads_min
    for ours, theirs in zip(one, many):
        np.testing.assert_array_equal(ours, theirs)
    counts, src, eid = one
    assert counts.sum() == src.size == eid.size
    if stored_ids and src.size:
        np.testing.assert_array_equal(graph.src.numpy()[eid], src)


def test_sampler_blocks_equal_on_one_and_two_threads(split_every_item):
    graph = random_multigraph(7, 300, 3000)
    seeds = torch.arange(0, 300, 3)
    sampler = NeighborSampler([4, 3, 2])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sampler.sample(graph, seeds, torch.Generator().manual_seed(5))
        torch.set_num_threads(2)
        two = sampler.sample(graph, seeds, torch.Generator().manual_seed(5))
    finally:
        torch.set_num_threads(before)
    for ours, theirs in zip(one, two):
        for name in ("src_nodes", "rowptr", "col", "edge_ids"):
            assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
