"""Tuple packing: many small graphs in fixed-size packs with almost no padding.

Krell et al., "Tuple Packing: Efficient Batching of Small Graphs in Graph Neural
Networks" (Graphcore, 2022). See docs/packing.md.
"""

from gnnforge.packing._assign import PackAssigner
from gnnforge.packing._collate import PackCollator
from gnnforge.packing._column_generation import LPBound
from gnnforge.packing._heuristics import HEURISTICS, check_monotone, weighted_heuristic
from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._loader import PackedLoader
from gnnforge.packing._pack import METHODS, pack
from gnnforge.packing._plan import PackingPlan, lower_bound
from gnnforge.packing._sampler import PackSampler
from gnnforge.packing._search import default_limits
from gnnforge.packing._static_batch import StaticBatch

__all__ = [
    "HEURISTICS",
    "METHODS",
    "LPBound",
    "PackAssigner",
    "PackCollator",
    "PackSampler",
    "PackedLoader",
    "PackingPlan",
    "StaticBatch",
    "check_monotone",
    "default_limits",
    "lower_bound",
    "pack",
    "size_histogram",
    "weighted_heuristic",
]
