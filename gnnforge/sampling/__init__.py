"""Minibatch sampling: NS, LABOR-0/*, random walks, dependent minibatches, feature cache."""

from gnnforge.sampling._block import Block
from gnnforge.sampling._common import InEdges
from gnnforge.sampling._feature_store import FeatureStore
from gnnforge.sampling._labor import LaborSampler
from gnnforge.sampling._neighbor import NeighborSampler
from gnnforge.sampling._random_walk import RandomWalkSampler
from gnnforge.sampling._sage import BlockSAGE, mean_aggregate
from gnnforge.sampling._seeds import EdgeBatch, EdgeSeeds, NodeSeeds
from gnnforge.sampling._variates import DependentKeys, VariateKey, draw_key, uniform_variates

__all__ = [
    "Block",
    "BlockSAGE",
    "DependentKeys",
    "EdgeBatch",
    "EdgeSeeds",
    "FeatureStore",
    "InEdges",
    "LaborSampler",
    "NeighborSampler",
    "NodeSeeds",
    "RandomWalkSampler",
    "VariateKey",
    "draw_key",
    "mean_aggregate",
    "uniform_variates",
]
