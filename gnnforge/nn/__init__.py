"""Graph neural network layers and models; every layer aggregates through gnnforge.ops."""

from gnnforge.nn._gat_conv import GATConv
from gnnforge.nn._gatv2_conv import GATv2Conv
from gnnforge.nn._gcn_conv import GCNConv
from gnnforge.nn._sg_conv import SGConv
from gnnforge.nn._tag_conv import TAGConv

__all__ = [
    "GATConv",
    "GATv2Conv",
    "GCNConv",
    "SGConv",
    "TAGConv",
]
