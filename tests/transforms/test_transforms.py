"""OneHotDegree and NormalizeFeatures equal PyG's transforms; Compose applies in order."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.transforms import Compose, NormalizeFeatures, OneHotDegree

pyg_transforms = pytest.importorskip("torch_geometric.transforms")


def _graph(seed: int, with_x: bool = True) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 9, (25,), generator=generator)
    dst = torch.randint(0, 9, (25,), generator=generator)
    src[0], dst[0] = 3, 3                                  # a self-loop
    data = {"x": torch.randn(10, 4, generator=generator)} if with_x else {}
    return Graph(src, dst, 10, node_data=data)             # node 9 isolated


@pytest.mark.parametrize("in_degree", [False, True])
@pytest.mark.parametrize("cat", [False, True])
@pytest.mark.parametrize("with_x", [False, True])
def test_one_hot_degree_equals_pyg(in_degree, cat, with_x):
    graph = _graph(0, with_x)
    ours = OneHotDegree(12, in_degree=in_degree, cat=cat)(graph)
    theirs = pyg_transforms.OneHotDegree(12, in_degree=in_degree, cat=cat)(graph.to_pyg())
    torch.testing.assert_close(ours.node_data["x"], theirs.x, rtol=0, atol=0)
    assert graph.node_data.get("x") is None or graph.node_data["x"].shape == (10, 4)


def test_one_hot_degree_names_a_node_above_max_degree():
    graph = Graph([0, 0, 0], [1, 2, 3], 4)
    with pytest.raises(ValueError, match="node 0 has degree 3 > max_degree=2"):
        OneHotDegree(2)(graph)


def test_normalize_features_equals_pyg():
    graph = _graph(1)
    ours = NormalizeFeatures()(graph)
    theirs = pyg_transforms.NormalizeFeatures()(graph.to_pyg())
    torch.testing.assert_close(ours.node_data["x"], theirs.x)
    assert torch.allclose(ours.node_data["x"].sum(-1)[ours.node_data["x"].sum(-1) > 0],
                          torch.tensor(1.0))
    assert NormalizeFeatures()(_graph(1, with_x=False)) == _graph(1, with_x=False)
    with pytest.raises(TypeError, match="is torch.int64"):
        NormalizeFeatures()(graph.with_node_data(x=torch.ones(10, 2, dtype=torch.long)))


def test_compose_applies_in_order():
    graph = _graph(2, with_x=False)
    composed = Compose([OneHotDegree(12), NormalizeFeatures()])(graph)
    theirs = pyg_transforms.Compose([pyg_transforms.OneHotDegree(12),
                                     pyg_transforms.NormalizeFeatures()])(graph.to_pyg())
    torch.testing.assert_close(composed.node_data["x"], theirs.x)
    with pytest.raises(TypeError, match=r"transforms\[1\] is a int"):
        Compose([OneHotDegree(3), 5])
