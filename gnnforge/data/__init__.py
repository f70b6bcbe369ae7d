"""Real datasets, parsers and seeded generators."""

from gnnforge.data._generators import (
    grid_2d,
    random_molecule_like,
    rmat,
    stochastic_block_model,
    uniform_random,
)
from gnnforge.data._paths import cache_dir, shared_datasets_dir

__all__ = [
    "cache_dir",
    "grid_2d",
    "random_molecule_like",
    "rmat",
    "shared_datasets_dir",
    "stochastic_block_model",
    "uniform_random",
]
