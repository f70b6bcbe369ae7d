"""NS and LABOR-0 against slow, obviously-correct references with their own randomness.

The references draw from numpy's generator (not the samplers' hash variates) and count a
layer's vertices as the set frontier | sampled sources, the way `Block.num_src_nodes`
counts them. Sizes are compared in distribution (mean within 5 standard errors) and
against the closed-form expectations of `_expected`.
"""

import numpy as np
import pytest
import torch

from gnnforge.data import rmat
from gnnforge.graph import Graph
from gnnforge.sampling import LaborSampler, NeighborSampler
from gnnforge.sampling._common import csr_arrays
from gnnforge.sampling._expected import expected_layer_sizes

from .sampling_helpers import random_multigraph


def ns_ref(csr, seeds, fanouts, rng):
    """Per-layer (sources, edges), input layer first: each s keeps min(k, d) distinct in-edges."""
    rowptr, col, _ = csr
    frontier, sizes = [int(s) for s in seeds], []
    for k in reversed(fanouts):
        nodes, edges = set(frontier), 0
        for s in frontier:
            d = int(rowptr[s + 1] - rowptr[s])
            picks = range(d) if d <= k else rng.choice(d, size=k, replace=False)
            for j in picks:
                nodes.add(int(col[rowptr[s] + j]))
                edges += 1
        sizes.append((len(nodes), edges))
        frontier = frontier + sorted(nodes - set(frontier))
    return sizes[::-1]


def labor0_ref(csr, seeds, fanouts, rng):
    """Per-layer (sources, edges): one uniform r_t per vertex and layer, edge kept iff r_t <= k/d_s."""
    rowptr, col, _ = csr
    num_nodes = rowptr.size - 1
    frontier, sizes = [int(s) for s in seeds], []
    for k in reversed(fanouts):
        r = rng.random(num_nodes)  # shared by every destination of this layer
        nodes, edges = set(frontier), 0
        for s in frontier:
            d = int(rowptr[s + 1] - rowptr[s])
            for j in range(rowptr[s], rowptr[s + 1]):
                if r[col[j]] <= k / d:
                    nodes.add(int(col[j]))
                    edges += 1
        sizes.append((len(nodes), edges))
        frontier = frontier + sorted(nodes - set(frontier))
    return sizes[::-1]


def _fast_sizes(sampler, graph, seeds, trials, seed):
    generator = torch.Generator().manual_seed(seed)
    return np.array([[(b.num_src_nodes, b.num_edges) for b in sampler.sample(graph, seeds, generator)]
                     for _ in range(trials)], dtype=np.float64)


def _ref_sizes(ref, graph, seeds, fanouts, trials, seed):
    csr, rng = csr_arrays(graph), np.random.default_rng(seed)
    return np.array([ref(csr, seeds.numpy(), fanouts, rng) for _ in range(trials)],
                    dtype=np.float64)


def _assert_same_mean(a, b, what):
    """Means of two samples [trials, ...] agree within 5 standard errors, elementwise."""
    se = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    gap = np.abs(a.mean(0) - b.mean(0))
    assert np.all(gap <= 5 * se + 1e-9), f"{what}: means {a.mean(0)} vs {b.mean(0)}, se {se}"


def _power_law_graph():
    return rmat(9, 3000, seed=5).to_undirected()


@pytest.mark.parametrize("name", ["ns", "labor0"])
def test_multi_layer_sizes_match_slow_reference(name):
    graph = _power_law_graph()
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(1))[:24]
    fanouts, trials = [3, 4], 150
    sampler = NeighborSampler(fanouts) if name == "ns" else LaborSampler(fanouts)
    ref = ns_ref if name == "ns" else labor0_ref
    fast = _fast_sizes(sampler, graph, seeds, trials, seed=2)
    slow = _ref_sizes(ref, graph, seeds, fanouts, trials, seed=3)
    _assert_same_mean(fast, slow, name)


def test_labor0_saves_vertices_against_slow_ns_reference():
    """The comparison the 20% target makes, done entirely by the references."""
    graph = _power_law_graph()
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(4))[:24]
    ns = _ref_sizes(ns_ref, graph, seeds, [3, 4], 60, seed=5)[:, :, 0].sum(1).mean()
    labor = _ref_sizes(labor0_ref, graph, seeds, [3, 4], 60, seed=6)[:, :, 0].sum(1).mean()
    fast_ns = _fast_sizes(NeighborSampler([3, 4]), graph, seeds, 60, 7)[:, :, 0].sum(1).mean()
    fast_labor = _fast_sizes(LaborSampler([3, 4]), graph, seeds, 60, 8)[:, :, 0].sum(1).mean()
    assert labor < ns
    assert abs((1 - fast_labor / fast_ns) - (1 - labor / ns)) < 0.05


@pytest.mark.parametrize("graph_fn", [_power_law_graph, lambda: random_multigraph(3, 50, 400)],
                         ids=["power-law", "multigraph"])
def test_one_layer_mean_equals_closed_form(graph_fn):
    graph = graph_fn()
    seeds = torch.arange(0, graph.num_nodes, 7)
    expected = expected_layer_sizes(graph, seeds.numpy(), 3)
    trials = 400
    for name, sampler in (("ns", NeighborSampler([3])), ("labor0", LaborSampler([3]))):
        sizes = _fast_sizes(sampler, graph, seeds, trials, seed=11)[:, 0, :]
        se = sizes.std(0, ddof=1) / np.sqrt(trials)
        gap = np.abs(sizes.mean(0) - np.array(expected[name]))
        assert np.all(gap <= 5 * se + 1e-9), (name, sizes.mean(0), expected[name])
    slow = _ref_sizes(labor0_ref, graph, seeds, [3], trials, seed=12)[:, 0, :]
    se = slow.std(0, ddof=1) / np.sqrt(trials)
    assert np.all(np.abs(slow.mean(0) - expected["labor0"]) <= 5 * se + 1e-9)


def test_closed_form_edge_cases():
    # star into 0: NS and LABOR-0 sample the same leaves in expectation (one destination)
    leaves = torch.arange(1, 11)
    star = Graph(leaves, torch.zeros(10, dtype=torch.int64), 12)  # node 11 isolated
    sizes = expected_layer_sizes(star, np.array([0]), 4)
    assert sizes["ns"] == pytest.approx((5.0, 4.0)) and sizes["labor0"] == pytest.approx((5.0, 4.0))
    assert expected_layer_sizes(star, np.array([11]), 4)["ns"] == (1.0, 0.0)
    assert expected_layer_sizes(star, np.array([], dtype=np.int64), 4)["labor0"] == (0.0, 0.0)
    full = expected_layer_sizes(star, np.array([0]), -1)
    assert full["ns"] == pytest.approx((11.0, 10.0)) and full["labor0"] == full["ns"]
    # two destinations sharing all 10 leaves, k = 5: LABOR max(1/2, 1/2), NS 1 - (1/2)^2
    both = Graph(torch.cat([leaves, leaves]), torch.cat([torch.zeros(10), torch.full((10,), 11)]).long(), 12)
    sizes = expected_layer_sizes(both, np.array([0, 11]), 5)
    assert sizes["labor0"][0] == pytest.approx(2 + 10 * 0.5)
    assert sizes["ns"][0] == pytest.approx(2 + 10 * 0.75)


def test_closed_form_labor0_never_above_ns():
    rng = np.random.default_rng(0)
    for seed in range(5):
        graph = random_multigraph(seed, 60, 600)
        frontier = rng.choice(60, 15, replace=False)
        sizes = expected_layer_sizes(graph, frontier, int(rng.integers(1, 6)))
        assert sizes["labor0"][0] <= sizes["ns"][0] + 1e-9
        assert sizes["labor0"][1] == sizes["ns"][1]
