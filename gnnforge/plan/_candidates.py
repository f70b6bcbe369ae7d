"""The candidate plans of a layer expression: enumerated and pruned once, then cached."""

from __future__ import annotations

from functools import cache

from gnnforge.plan._enumerate import enumerate_compositions
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition
from gnnforge.plan._prune import Pruned, prune, regime_of

__all__ = ["all_verdicts", "candidates", "default_composition", "is_valid_plan"]


@cache
def all_verdicts(expression: Node) -> tuple[Pruned, ...]:
    """Every enumerated composition with its pruning verdict (cached per expression)."""
    return tuple(prune(enumerate_compositions(expression)))


@cache
def _valid(expression: Node) -> frozenset[Composition]:
    return frozenset(v.composition for v in all_verdicts(expression))


def default_composition(expression: Node) -> Composition:
    """PyG's plan: the expression as written, Â precomputed as edge weights."""
    return all_verdicts(expression)[0].composition


def is_valid_plan(expression: Node, plan: Composition) -> bool:
    """True when `plan` computes `expression` (it is one of its enumerated compositions)."""
    return plan in _valid(expression)


def candidates(expression: Node, in_width: int | None = None,
               out_width: int | None = None) -> list[Composition]:
    """The default plan first, then the pruned plans that can win for these widths (all
    kept plans when widths are None).

    The default is a candidate whatever pruning says of it: pruning reasons about operand
    sizes only, and on small graphs fixed per-call costs can make the plan that does more
    work the faster one (measured: GCN and GAT on Cora, 32 -> 256). With the default
    always costed, the planner can lose to it only through a cost-model error, which the
    decision margin of `choose` guards against.
    """
    regime = None if in_width is None else regime_of(in_width, out_width)
    verdicts = all_verdicts(expression)
    return [verdicts[0].composition] + [
        v.composition for v in verdicts[1:]
        if v.kept and (regime is None or regime in v.wins_when)]
