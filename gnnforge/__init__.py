"""gnnforge: fast graph neural network training and inference on PyTorch."""

from gnnforge._doctor import doctor
from gnnforge.graph import BipartiteGraph, Graph, GraphBatch, GraphError, Subgraph

__version__ = "0.1.0"

__all__ = ["BipartiteGraph", "Graph", "GraphBatch", "GraphError", "Subgraph", "__version__",
           "doctor"]
