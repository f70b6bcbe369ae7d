import math

import numpy as np
import pytest
import torch
from scipy import stats

from gnnforge.data import rmat
from gnnforge.sampling import DependentKeys, LaborSampler, NeighborSampler, uniform_variates


@pytest.mark.parametrize("kappa", [1, 4, 64, math.inf])
def test_dependent_variates_uniform_for_every_kappa(kappa):
    keys = DependentKeys(kappa, seed=11)
    ids = torch.arange(4000)
    for step in (0, 1, 3, 70):
        r = uniform_variates(ids, keys[step]).numpy()
        assert stats.kstest(r, "uniform").pvalue > 1e-3


def test_consecutive_variates_are_continuous_within_group():
    keys = DependentKeys(100, seed=1)
    ids = torch.arange(2000)
    gaps = [np.abs(uniform_variates(ids, keys[s]).numpy()
                   - uniform_variates(ids, keys[s + 1]).numpy()).mean() for s in (0, 50, 99)]
    assert max(gaps) < 0.05  # 1/100 of a quarter turn per step
    # the group boundary continues from key b, so it is just as smooth
    assert np.allclose(uniform_variates(ids, DependentKeys(4, 2)[4]).numpy(),
                       uniform_variates(ids, DependentKeys(4, 2)[4]).numpy())


def _overlap(sampler, graph, kappa, steps=6):
    keys = DependentKeys(kappa, seed=5)
    seeds = torch.arange(0, graph.num_nodes, 7)
    previous, overlaps = None, []
    for step in range(steps):
        nodes = set(sampler.sample(graph, seeds, key=keys[step])[0].src_nodes.tolist())
        if previous is not None:
            overlaps.append(len(nodes & previous) / len(nodes | previous))
        previous = nodes
    return float(np.mean(overlaps))


@pytest.mark.parametrize("sampler", [LaborSampler([5, 5]), NeighborSampler([5, 5])])
def test_overlap_grows_with_kappa(sampler):
    graph = rmat(10, 10000, seed=2).to_undirected()
    overlaps = [_overlap(sampler, graph, kappa) for kappa in (1, 8, 64, math.inf)]
    assert overlaps == sorted(overlaps), overlaps
    assert overlaps[-1] == pytest.approx(1.0) and overlaps[0] < overlaps[2]


def test_kappa_checked():
    with pytest.raises(ValueError, match="kappa"):
        DependentKeys(0)
    with pytest.raises(ValueError, match="kappa"):
        DependentKeys(2.5)


def test_kappa_one_gives_plain_independent_keys():
    keys, again = DependentKeys(1, seed=8), DependentKeys(1, seed=8)
    assert all(not keys[s].dependent and keys[s] == again[s] for s in range(3))
    assert len({keys[s].key_a for s in range(50)}) == 50
    ids = torch.arange(3000)
    a, b = uniform_variates(ids, keys[0]).numpy(), uniform_variates(ids, keys[1]).numpy()
    assert abs(stats.pearsonr(a, b)[0]) < 0.1  # consecutive batches independent
