"""Graph neural network layers and models; every layer aggregates through gnnforge.ops."""

from gnnforge.nn._gin_conv import GINConv, GINEConv
from gnnforge.nn._rgcn_conv import RGCNConv
from gnnforge.nn._sage_conv import SAGEConv

__all__ = [
    "GINConv",
    "GINEConv",
    "RGCNConv",
    "SAGEConv",
]
