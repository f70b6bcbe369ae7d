"""benchmarks/_bandwidth.py: the bound rule on synthetic numbers, compulsory bytes, and
the address-ordered probe graph."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bandwidth import (  # noqa: E402
    BANDWIDTH_SHARE,
    LATENCY_RATIO,
    address_ordered,
    bound,
    compulsory_bytes,
    effective_gbs,
    level,
)

from gnnforge.graph import Graph  # noqa: E402


def test_a_high_share_of_copy_bandwidth_is_bandwidth_bound_whatever_the_gathers():
    assert bound(0.85, 1.0) == "bandwidth"
    assert bound(0.85, 3.0) == "bandwidth"
    assert bound(BANDWIDTH_SHARE, 1.0) == "bandwidth"  # the threshold itself counts


def test_below_the_share_a_slow_graph_against_its_ordered_twin_is_gather_latency():
    assert bound(0.3, 2.4) == "gather latency"
    assert bound(BANDWIDTH_SHARE - 0.01, LATENCY_RATIO) == "gather latency"


def test_below_both_thresholds_instructions_bound_it():
    assert bound(0.3, 1.1) == "instructions"
    assert bound(0.05, LATENCY_RATIO - 0.01) == "instructions"
    assert bound(0.3, 0.8) == "instructions"  # the ordered twin slower: noise, not latency


def test_a_streamed_twin_at_the_bandwidth_share_is_bandwidth_bound_without_gather_cost():
    assert bound(0.5, 1.3) == "bandwidth"      # the twin at 65% of copy bandwidth
    assert bound(0.45, 1.3) == "instructions"  # the twin at 58.5%


def test_a_missing_measurement_says_so():
    assert bound(math.nan, 2.0) == "n/a"
    assert bound(0.3, math.nan) == "n/a"


def test_bytes_that_fit_the_last_level_cache_are_measured_against_its_bandwidth():
    assert level(32 * 2**20, 32 * 2**20) == "LLC"
    assert level(32 * 2**20 + 1, 32 * 2**20) == "DRAM"


def test_compulsory_bytes_of_a_small_graph():
    graph = Graph(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1]), 3)
    # x and out: 2 * 3 * 4 floats, rowptr 4 + col 4 int32s; times 4 bytes
    assert compulsory_bytes(graph, 4, backward=False) == (24 + 4 + 4) * 4
    assert compulsory_bytes(graph, 4, backward=True) == 2 * (24 + 4 + 4) * 4
    assert effective_gbs(2 * 10**9, 1000.0) == 2.0


def test_address_ordered_keeps_both_degree_sequences_and_streams_both_walks():
    generator = torch.Generator().manual_seed(0)
    for num_nodes, num_edges in ((1, 0), (5, 12), (50, 400)):
        src = torch.randint(0, num_nodes, (num_edges,), generator=generator)
        dst = torch.randint(0, num_nodes, (num_edges,), generator=generator)
        graph = Graph(src, dst, num_nodes)
        ordered = address_ordered(graph)
        assert ordered.num_nodes == num_nodes and ordered.num_edges == num_edges
        for old, new in zip(graph.coo(), ordered.coo()):
            assert torch.equal(torch.bincount(old, minlength=num_nodes),
                               torch.bincount(new, minlength=num_nodes))
        _, col, _ = ordered.csr()  # the forward's gathers (sources), in its walk's order
        _, row, _ = ordered.csc()  # the backward's (destinations)
        for gathered in (col, row):
            assert bool((gathered[1:] >= gathered[:-1]).all())
