"""Graph neural network layers, models and readouts."""

from gnnforge.nn._gated_graph_conv import GatedGraphConv
from gnnforge.nn._readout import max_pool, mean_pool, pool, sum_pool

__all__ = ["GatedGraphConv", "max_pool", "mean_pool", "pool", "sum_pool"]
