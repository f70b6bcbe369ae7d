"""Minibatch loaders over lists of graphs: PyG-style `DataLoader` (GraphBatch of
`batch_size` graphs) and the packing batch sampler for fixed-shape batches."""

from gnnforge.loader._dataloader import DataLoader, collate_graphs
from gnnforge.packing._loader import PackedLoader
from gnnforge.packing._sampler import PackSampler

__all__ = ["DataLoader", "PackSampler", "PackedLoader", "collate_graphs"]
