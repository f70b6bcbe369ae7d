"""Known answers for graph_features."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.plan import graph_features
from gnnforge.plan._features import degrees_and_loops


def test_known_answer_star():
    graph = Graph(torch.arange(1, 6), torch.zeros(5, dtype=torch.long), 6)  # 5 edges into node 0
    f = graph_features(graph)
    assert f["num_edges"] == 5 and f["num_dst_nodes"] == 6
    assert f["density"] == pytest.approx(5 / 36)
    assert f["degree_mean"] == pytest.approx(5 / 6) and f["degree_max"] == 5
    std = math.sqrt(((5 - 5 / 6) ** 2 + 5 * (5 / 6) ** 2) / 6)
    assert f["degree_std"] == pytest.approx(std)
    assert f["degree_skew"] > 1.5  # one heavy row
    assert f["frac_degree_over_4"] == pytest.approx(1 / 6) and f["frac_degree_over_16"] == 0


def test_empty_and_edgeless_graphs():
    for graph in (Graph([], [], 0), Graph([], [], 4)):
        f = graph_features(graph)
        assert f["num_edges"] == 0 and f["degree_std"] == 0 and f["degree_skew"] == 0


def test_rejects_non_graphs():
    with pytest.raises(TypeError, match="sampler block"):
        graph_features([1, 2])


@pytest.mark.parametrize("seed", range(5))
def test_one_pass_degrees_and_loops_equal_torch(seed):
    generator = torch.Generator().manual_seed(seed)
    num_nodes = int(torch.randint(1, 40, (1,), generator=generator))
    num_edges = int(torch.randint(0, 200, (1,), generator=generator))
    src = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    src[: num_edges // 5] = dst[: num_edges // 5]  # self-loops; repeats give multi-edges
    graph = Graph(src, dst, num_nodes)
    degree, loops = degrees_and_loops(graph)
    assert np.array_equal(degree, torch.bincount(dst, minlength=num_nodes).numpy())
    assert loops == int((src == dst).sum())
    f = graph_features(graph)
    reference = torch.bincount(dst, minlength=num_nodes).double()
    assert f["num_self_loops"] == loops
    assert f["degree_mean"] == pytest.approx(float(reference.mean()))
    assert f["degree_std"] == pytest.approx(float(reference.std(unbiased=False)))
    assert f["degree_max"] == float(reference.max())
    assert f["frac_degree_over_4"] == pytest.approx(float((reference > 4).double().mean()))
