"""Per-graph values the planned layers share: prepared structures (self-loops, degrees,
edge normalisation) and the planner's graph features.

Layers used to cache their prepared graph per layer, so an L-layer model normalised the
same graph L times, and GCN's precomputed plan re-ran its edge normalisation on every
forward. Here one entry per (graph object, preparation) serves every layer and epoch.

A gnnforge `Graph` or sampler block keeps its entries in its own cache dict, so they
live and die with it. A global LRU of graphs had kept up to 32 of them alive after their
last use: `gnnforge train --seeds 10` on Coauthor Physics (1.2 GB of features per
loaded graph) grew by a graph per seed until the kernel's OOM killer stopped it at
13 GB. Other graph objects (the kernel protocol's duck types) go to the LRU, whose
entries hold the graph itself, so its id cannot be reused while the entry lives.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import torch

__all__ = ["GRAPH_CACHE", "GraphCache", "clear_cache"]

T = TypeVar("T")


class GraphCache:
    """A small LRU map from (graph object, key) to a value derived from that graph.

    Args:
        capacity: entries kept; a full-graph model needs one or two per graph, a sampled
            one a few per step (one per block and preparation).
    """

    def __init__(self, capacity: int = 32) -> None:
        if capacity < 1:
            raise ValueError(f"GraphCache: capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, graph: Any, key: Hashable, build: Callable[[], T]) -> T:
        """The value for (graph, key), built once by `build()` (without autograd, outside
        inference mode, so it can be used by any later forward and backward)."""
        own = getattr(graph, "_cache", None)
        if isinstance(own, dict):
            return _own_entry(own, (_OWN, key), build)
        full = (id(graph), key)
        if torch.compiler.is_compiling():
            # Traced (torch.compile): no lock (dynamo cannot enter one) and no reordering
            # (a traced mutation of this cache would fail its guard and recompile). A hit
            # is read as is; a miss is built into the graph and not stored: warm the cache
            # with one eager call first (`gnnforge train --compile` does).
            entry = self._entries.get(full)
            return entry[1] if entry is not None and entry[0] is graph else build()
        with self._lock:
            entry = self._entries.get(full)
            if entry is not None and entry[0] is graph:
                self._entries.move_to_end(full)
                return entry[1]
        with torch.inference_mode(False), torch.no_grad():
            value = build()
        with self._lock:
            self._entries[full] = (graph, value)
            self._entries.move_to_end(full)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_OWN = "prepared"  # the first part of the keys this cache puts in a graph's own dict


def _own_entry(store: dict, key: tuple, build: Callable[[], T]) -> T:
    value = store.get(key)
    if value is not None or torch.compiler.is_compiling():  # traced: read, never stored
        return value if value is not None else build()
    with torch.inference_mode(False), torch.no_grad():
        value = build()
    store[key] = value
    return value


GRAPH_CACHE = GraphCache()


def clear_cache() -> None:
    """Drop the LRU's per-graph values (those of graph objects without a cache of their
    own), freeing the graphs they hold; a gnnforge Graph's values go with the Graph.
    Layers rebuild what they need on their next call."""
    GRAPH_CACHE.clear()
