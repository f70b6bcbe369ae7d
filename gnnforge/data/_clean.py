"""The cleaning options every reader shares, with every dropped edge counted.

Order: self-loops are removed first (when asked), then reverse edges are added
(`symmetrize`), then duplicates are removed (`dedup`, keeping each first occurrence, so
with `symmetrize` an edge whose reverse was already in the file is counted as a
duplicate of it). Edge data travels with its edge; an added reverse edge copies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnnforge.graph import Graph

__all__ = ["CleanOptions", "clean_graph"]

_SELF_LOOP_CHOICES = ("keep", "remove")


@dataclass(frozen=True)
class CleanOptions:
    """How to normalise a parsed edge set.

    Attributes:
        symmetrize: add the reverse of every edge (like `Graph.to_undirected`).
        dedup: drop repeated (src, dst[, edge_type]) edges, keeping the first.
        self_loops: "keep" (default: as stored) or "remove".
    """

    symmetrize: bool = False
    dedup: bool = False
    self_loops: str = "keep"

    def __post_init__(self) -> None:
        if self.self_loops not in _SELF_LOOP_CHOICES:
            raise ValueError(
                f"self_loops must be one of {_SELF_LOOP_CHOICES}, got {self.self_loops!r}"
            )
        for name in ("symmetrize", "dedup"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"symmetrize": self.symmetrize, "dedup": self.dedup, "self_loops": self.self_loops}


def clean_graph(graph: Graph, options: CleanOptions) -> tuple[Graph, dict[str, int]]:
    """Apply `options` to `graph`; returns (new graph, counts of what changed).

    Counts: `edges_in` (as parsed), `self_loops_removed`, `reverse_edges_added`,
    `duplicates_removed`, `edges_out`.
    """
    report = {
        "edges_in": graph.num_edges,
        "self_loops_removed": 0,
        "reverse_edges_added": 0,
        "duplicates_removed": 0,
    }
    if options.self_loops == "remove":
        before = graph.num_edges
        graph = graph.remove_self_loops()
        report["self_loops_removed"] = before - graph.num_edges
    if options.symmetrize:
        report["reverse_edges_added"] = graph.num_edges
        graph = graph.to_undirected(dedup=False)
    if options.dedup:
        before = graph.num_edges
        graph = graph.coalesce()
        report["duplicates_removed"] = before - graph.num_edges
    report["edges_out"] = graph.num_edges
    return graph, report
