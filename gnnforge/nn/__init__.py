"""Graph neural network layers and models; every layer aggregates through gnnforge.ops."""

from gnnforge.nn._gat_conv import GATConv
from gnnforge.nn._gatv2_conv import GATv2Conv
from gnnforge.nn._gated_graph_conv import GatedGraphConv
from gnnforge.nn._gcn_conv import GCNConv
from gnnforge.nn._ggnn_conv import GGNNConv
from gnnforge.nn._gin_classifier import GINClassifier
from gnnforge.nn._gin_conv import GINConv, GINEConv
from gnnforge.nn._indexed_rows import IndexedRows
from gnnforge.nn._masked_batch_norm import MaskedBatchNorm1d
from gnnforge.nn._molecule_gin import FeatureEncoder, MoleculeGIN
from gnnforge.nn._node_models import NodeClassifier
from gnnforge.nn._readout import max_pool, mean_pool, pool, sum_pool
from gnnforge.nn._rgcn_conv import RGCNConv
from gnnforge.nn._sage_conv import SAGEConv
from gnnforge.nn._sparse_features import SparseFeatures
from gnnforge.nn._sg_conv import SGConv
from gnnforge.nn._tag_conv import TAGConv

__all__ = [
    "FeatureEncoder",
    "GATConv",
    "GATv2Conv",
    "GatedGraphConv",
    "GCNConv",
    "GGNNConv",
    "GINClassifier",
    "GINConv",
    "GINEConv",
    "IndexedRows",
    "MaskedBatchNorm1d",
    "MoleculeGIN",
    "NodeClassifier",
    "RGCNConv",
    "SAGEConv",
    "SGConv",
    "SparseFeatures",
    "TAGConv",
    "max_pool",
    "mean_pool",
    "pool",
    "sum_pool",
]
