"""`NormalizeFeatures`: rows of node features scaled to sum to one."""

from __future__ import annotations

from collections.abc import Sequence

from gnnforge.graph import Graph

__all__ = ["NormalizeFeatures"]


class NormalizeFeatures:
    """x <- (x - min(x)) / rowsum, each row summing to 1 (rows summing to < 1 are only
    shifted), for each named node-data key.

    Equal to `torch_geometric.transforms.NormalizeFeatures` (PyG subtracts the global
    minimum first so that rows with negative entries still sum to one).

    Args:
        attrs: node_data keys to normalise (PyG's default ["x"]); absent keys are skipped,
            as in PyG.

    Raises:
        TypeError: when a named feature is not floating (integer ids are not features
            to normalise).
    """

    def __init__(self, attrs: Sequence[str] = ("x",)) -> None:
        self.attrs = list(attrs)

    def __call__(self, graph: Graph) -> Graph:
        updated = {}
        for key in self.attrs:
            value = graph.node_data.get(key)
            if value is None or value.numel() == 0:
                continue
            if not value.is_floating_point():
                raise TypeError(f"NormalizeFeatures: node_data[{key!r}] is {value.dtype}; "
                                "normalise floating features only")
            value = value - value.min()
            updated[key] = value / value.sum(dim=-1, keepdim=True).clamp(min=1.0)
        return graph.with_node_data(**updated) if updated else graph

    def __repr__(self) -> str:
        return f"NormalizeFeatures({self.attrs})"
