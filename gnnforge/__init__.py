"""gnnforge: fast graph neural network training and inference on PyTorch."""

from gnnforge.graph import Graph, GraphBatch, GraphError, Subgraph

__version__ = "0.1.0"

__all__ = ["Graph", "GraphBatch", "GraphError", "Subgraph", "__version__"]
