"""Enumeration: every tree the rewrite table reaches from a layer's default expression."""

from __future__ import annotations

from collections import deque

from gnnforge.plan._ir import Node, subtrees
from gnnforge.plan._primitives import NORM_MODES, Composition
from gnnforge.plan._rewrites import rewrites_anywhere

__all__ = ["enumerate_compositions", "enumerate_trees"]


def enumerate_trees(expression: Node, limit: int = 20_000) -> list[Node]:
    """All trees equal to `expression` under the rewrite table, the default first.

    Breadth-first closure with structural de-duplication, so trees come in order of
    distance from the default.

    Raises:
        RuntimeError: when the closure exceeds `limit` trees (an expression too large to
            enumerate exhaustively).
    """
    seen = {expression: None}
    queue = deque([expression])
    while queue:
        for tree in rewrites_anywhere(queue.popleft()):
            if tree not in seen:
                seen[tree] = None
                queue.append(tree)
                if len(seen) > limit:
                    raise RuntimeError(f"enumeration passed {limit} trees; the expression is "
                                       "too large to enumerate exhaustively")
    return list(seen)


def enumerate_compositions(expression: Node) -> list[Composition]:
    """Every tree x every realisation of Â it can use; the default (PyG's plan) first."""
    out = []
    for tree in enumerate_trees(expression):
        uses_normadj = any(n.kind == "normadj" for n in subtrees(tree))
        out.extend(Composition(tree, norm) for norm in (NORM_MODES if uses_normadj else (None,)))
    return out
