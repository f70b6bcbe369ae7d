"""Graph transforms in the style of `torch_geometric.transforms`: callables Graph -> Graph
(a new graph; the input is unchanged), composable with `Compose`."""

from gnnforge.transforms._compose import Compose
from gnnforge.transforms._largest_component import LargestConnectedComponents
from gnnforge.transforms._normalize_features import NormalizeFeatures
from gnnforge.transforms._one_hot_degree import OneHotDegree

__all__ = ["Compose", "LargestConnectedComponents", "NormalizeFeatures", "OneHotDegree"]
