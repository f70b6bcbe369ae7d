"""Graph neural network layers and models; every layer aggregates through gnnforge.ops."""

from gnnforge.nn._gin_conv import GINConv, GINEConv
from gnnforge.nn._masked_batch_norm import MaskedBatchNorm1d
from gnnforge.nn._molecule_gin import FeatureEncoder, MoleculeGIN
from gnnforge.nn._node_models import NodeClassifier
from gnnforge.nn._rgcn_conv import RGCNConv
from gnnforge.nn._sage_conv import SAGEConv

__all__ = [
    "FeatureEncoder",
    "GINConv",
    "GINEConv",
    "MaskedBatchNorm1d",
    "MoleculeGIN",
    "NodeClassifier",
    "RGCNConv",
    "SAGEConv",
]
