"""Graph neural network layers and models."""

from gnnforge.nn._gated_graph_conv import GatedGraphConv

__all__ = ["GatedGraphConv"]
