import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gnnforge.data import rmat
from gnnforge.sampling import DependentKeys, LaborSampler, NeighborSampler, uniform_variates
from gnnforge.sampling._common import csr_arrays
from gnnforge.graph import Graph
from gnnforge.sampling._kernels import _TABLE_MAX_NODES, labor_importance, labor_layer
from gnnforge.sampling._variates import variate

from .sampling_helpers import check_blocks, random_multigraph, star_in


def labor0_ref(graph, seeds, fanouts, key):
    """Plain-Python LABOR-0: keep (t -> s) iff r_t <= k/d_s; compact dst first, then first-seen."""
    rowptr, col, eids = csr_arrays(graph)
    frontier = seeds.tolist()
    layers = []
    for layer in reversed(range(len(fanouts))):
        r = uniform_variates(torch.arange(graph.num_nodes), key.for_layer(layer)).numpy()
        local = {v: i for i, v in enumerate(frontier)}
        nodes, cols, picked = list(frontier), [], []
        for s in frontier:
            d = rowptr[s + 1] - rowptr[s]
            for j in range(rowptr[s], rowptr[s + 1]):
                if d <= fanouts[layer] or r[col[j]] <= fanouts[layer] / d:
                    if col[j] not in local:
                        local[col[j]] = len(nodes)
                        nodes.append(col[j])
                    cols.append(local[col[j]])
                    picked.append(eids[j])
        layers.append((nodes, cols, picked))
        frontier = nodes
    return layers[::-1]


@pytest.mark.parametrize("seed,seeds", [
    (0, [0, 7, 3, 59, 20]), (1, [0, 7, 3, 59, 20]), (2, [0, 7, 3, 59, 20]),
    (3, [4]),  # few in-edges: r_t hashed per edge
    (4, list(range(60))),  # in-edges >= nodes: r_t from the per-vertex table
])
def test_labor0_equals_reference(seed, seeds):
    graph = random_multigraph(seed, num_nodes=60, num_edges=500)
    seeds = torch.tensor(seeds)
    key = DependentKeys(1 if seed % 2 else 4, seed=seed)[1]  # plain and dependent keys
    blocks = LaborSampler([2, 3]).sample(graph, seeds, key=key)
    check_blocks(graph, seeds, blocks)
    for block, (nodes, cols, picked) in zip(blocks, labor0_ref(graph, seeds, [2, 3], key)):
        assert block.src_nodes.tolist() == [int(v) for v in nodes]
        assert block.col.tolist() == cols and block.edge_ids.tolist() == [int(e) for e in picked]


@settings(max_examples=30, deadline=None)
@given(num_nodes=st.integers(0, 30), edges=st.lists(st.tuples(st.integers(0, 29),
                                                              st.integers(0, 29)), max_size=120),
       fraction=st.floats(0, 1), seed=st.integers(0, 5), dependent=st.booleans())
def test_labor0_equals_reference_on_any_multigraph(num_nodes, edges, fraction, seed,
                                                    dependent):
    edges = [(u, v) for u, v in edges if u < num_nodes and v < num_nodes]
    graph = Graph([u for u, _ in edges], [v for _, v in edges], num_nodes)
    seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    seeds = seeds[:int(fraction * num_nodes)]
    key = DependentKeys(4 if dependent else 1, seed=seed)[1]
    blocks = LaborSampler([2, 1]).sample(graph, seeds, key=key)
    check_blocks(graph, seeds, blocks)
    for block, (nodes, cols, picked) in zip(blocks, labor0_ref(graph, seeds, [2, 1], key)):
        assert block.src_nodes.tolist() == [int(v) for v in nodes]
        assert block.col.tolist() == cols and block.edge_ids.tolist() == [int(e) for e in picked]


def _labor_layer_ref(rowptr, col, eids, rows, c, pi_edge, use_pi, layer_key):
    """Plain Python: keep t -> s_i iff r_t <= c_i pi_t; weights 1/min(1, p), normalised
    to mean 1 per destination."""
    counts, src, eid, weight = [], [], [], []
    m = 0
    for i, row in enumerate(rows):
        kept = []
        for j in range(rowptr[row], rowptr[row + 1]):
            p = c[i] * (pi_edge[m] if use_pi else 1.0)
            m += 1
            u = variate(layer_key.key_a, layer_key.key_b, layer_key.mix, layer_key.dependent,
                        int(col[j]), 0)
            if u <= p:
                kept.append((int(col[j]), int(eids[j]), 1.0 / min(1.0, p)))
        counts.append(len(kept))
        norm = sum(w for _, _, w in kept)
        for t, e, w in kept:
            src.append(t)
            eid.append(e)
            weight.append(w * len(kept) / norm)
    return counts, src, eid, weight


@pytest.mark.parametrize("use_pi", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labor_layer_equals_reference_in_every_path(use_pi, seed):
    """Per-edge hashing and the per-vertex table agree; buffers that must grow (capacity
    0 and 1) give what the expected-size buffers give; LABOR-* weights match."""
    graph = random_multigraph(seed, num_nodes=60, num_edges=700)
    rowptr, col, eids = csr_arrays(graph)
    rng = np.random.default_rng(seed)
    rows = rng.choice(60, 40, replace=False).astype(np.int64)
    degree = (rowptr[rows + 1] - rowptr[rows]).astype(np.float64)
    c = np.where(degree <= 3, np.inf, 3 / np.maximum(degree, 1))
    pi_edge = rng.uniform(0.2, 1.5, int(degree.sum())) if use_pi else np.ones(0)
    layer_key = DependentKeys(1 if seed % 2 else 4, seed=seed)[2].for_layer(1)
    args = (layer_key.key_a, layer_key.key_b, layer_key.mix, layer_key.dependent)
    expected = _labor_layer_ref(rowptr, col, eids, rows, c, pi_edge, use_pi, layer_key)
    assert degree.sum() >= 60  # the frontier reads every vertex's worth: table path
    for num_nodes, capacity in [(60, -1), (_TABLE_MAX_NODES + 1, -1), (60, 0),
                                (_TABLE_MAX_NODES + 1, 1)]:
        counts, src, eid, weight = labor_layer(rowptr, col, eids, rows, c, pi_edge, use_pi,
                                               num_nodes, *args, capacity)
        assert counts.tolist() == expected[0]
        assert src.tolist() == expected[1] and eid.tolist() == expected[2]
        if use_pi:
            np.testing.assert_allclose(weight, expected[3], rtol=1e-12)
        else:
            assert weight.size == 0  # LABOR-0 is unweighted


def test_labor0_keep_probability_is_min_one_k_over_d():
    leaves, fanout, trials = 40, 6, 1500
    graph = star_in(leaves)
    kept = np.zeros(leaves + 1)
    generator = torch.Generator().manual_seed(2)
    for _ in range(trials):
        (block,) = LaborSampler([fanout]).sample(graph, torch.tensor([0]), generator)
        kept[block.src_nodes[block.col].numpy()] += 1
    total = kept[1:].sum()
    # each edge kept w.p. k/d: the total is Binomial(d * trials, k/d)
    assert stats.binomtest(int(total), leaves * trials, fanout / leaves).pvalue > 1e-3
    assert stats.chisquare(kept[1:]).pvalue > 1e-3
    (block,) = LaborSampler([leaves + 1]).sample(graph, torch.tensor([0]), generator)
    assert block.num_edges == leaves  # d <= k keeps every edge


def _mean_sizes(sampler, graph, batches, batch_size=64):
    generator = torch.Generator().manual_seed(0)
    sizes = []
    for _ in range(batches):
        seeds = torch.randperm(graph.num_nodes, generator=generator)[:batch_size]
        sizes.append([b.num_src_nodes for b in sampler.sample(graph, seeds, generator)])
    return np.mean(sizes, axis=0)


def test_labor_samples_fewer_vertices_than_ns():
    graph = rmat(10, 12000, seed=1).to_undirected()
    ns = _mean_sizes(NeighborSampler([5, 5]), graph, 20)
    labor0 = _mean_sizes(LaborSampler([5, 5]), graph, 20)
    labor_star = _mean_sizes(LaborSampler([5, 5], importance_sampling=True), graph, 20)
    assert labor0[0] < ns[0]
    assert labor_star[0] <= labor0[0] * 1.02  # sampling noise on 20 batches


def test_labor_star_expectation_never_above_labor0():
    graph = rmat(10, 10000, seed=3).to_undirected()
    rowptr, col, _ = csr_arrays(graph)
    rng = np.random.default_rng(0)
    for _ in range(5):
        frontier = rng.choice(graph.num_nodes, 80, replace=False).astype(np.int64)
        _, _, expected0 = labor_importance(rowptr, col, frontier, 5, 0)
        for iterations in (1, 3, -1):
            c, pi_edge, expected = labor_importance(rowptr, col, frontier, 5, iterations)
            assert expected <= expected0 + 1e-9
            offset = 0
            for i, s in enumerate(frontier):  # the variance constraint of NS holds
                d = rowptr[s + 1] - rowptr[s]
                pi = pi_edge[offset:offset + d]
                offset += d
                if d > 5:
                    p = np.minimum(1.0, c[i] * pi)
                    assert np.isclose((1.0 / p).sum(), d * d / 5, rtol=1e-6)
                sources = col[rowptr[s]:rowptr[s + 1]]  # one pi per vertex, on every edge
                for t in np.unique(sources):
                    assert np.ptp(pi[sources == t]) == 0
            assert offset == pi_edge.size


def test_labor_star_weights_normalised_per_destination():
    graph = random_multigraph(7, num_nodes=50, num_edges=600)
    seeds = torch.arange(10)
    blocks = LaborSampler([3], importance_sampling=2).sample(graph, seeds,
                                                             torch.Generator().manual_seed(0))
    check_blocks(graph, seeds, blocks)
    block = blocks[0]
    assert block.edge_weight is not None and bool((block.edge_weight > 0).all())
    for i in range(block.num_dst_nodes):
        w = block.edge_weight[block.rowptr[i]:block.rowptr[i + 1]]
        assert torch.isclose(w.sum(), torch.tensor(float(w.numel())), rtol=1e-5)


def test_importance_sampling_argument_checked():
    with pytest.raises(ValueError, match="importance_sampling"):
        LaborSampler([3], importance_sampling=-5)
