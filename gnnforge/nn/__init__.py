"""Layers, models and readouts."""

from gnnforge.nn._readout import max_pool, mean_pool, pool, sum_pool

__all__ = ["max_pool", "mean_pool", "pool", "sum_pool"]
