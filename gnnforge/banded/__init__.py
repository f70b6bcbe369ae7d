"""Banded dense propagation: RCM reordering, block-banded tensors, batched-matmul message passing.

Reference: "Fast Training of Sparse Graph Neural Networks on Dense Hardware" (ICLR 2020
submission). See docs/banded.md.
"""

from gnnforge.banded._blocks import BandedBlocks, compile_blocks
from gnnforge.banded._dataset import (
    CompiledDataset,
    assemble_supergraphs,
    compile_dataset,
    supergraph_batch,
)
from gnnforge.banded._propagate import (
    aggregate_by_type,
    propagate,
    sparse_propagate,
    typed_in_degree,
)
from gnnforge.banded._rcm import bandwidth, rcm_order
from gnnforge.banded._stats import BandwidthStats, bandwidth_stats, plot_bandwidth_histograms

__all__ = [
    "BandedBlocks",
    "BandwidthStats",
    "CompiledDataset",
    "aggregate_by_type",
    "assemble_supergraphs",
    "bandwidth",
    "bandwidth_stats",
    "compile_blocks",
    "compile_dataset",
    "plot_bandwidth_histograms",
    "propagate",
    "rcm_order",
    "sparse_propagate",
    "supergraph_batch",
    "typed_in_degree",
]
