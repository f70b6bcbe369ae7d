"""Input-oblivious pruning: drop plans that cannot win on any graph, annotate the rest.

Plan T' dominates T when, for every primitive kind, T' runs no more calls of it and its
calls, largest against largest, are no larger (a superset of primitives on the same
sizes, or the same primitives on larger operands, makes T lose on every graph). Sizes
are compared at sample points of (nodes, edges, widths, heads), separately for the two
width regimes: a plan dominated only when the input is narrower than the output is
annotated "in > out" (it can win only there), and the other way round.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gnnforge.plan._primitives import Composition, bind, primitives

__all__ = ["REGIMES", "Pruned", "prune", "regime_of"]

_GRAPHS = ((1_000, 5_000), (100_000, 2_000_000), (2_000, 1_000_000))
_WIDTHS = {"in<out": ((32, 256), (64, 2048), (128, 512)),
           "in>out": ((256, 32), (2048, 64), (512, 128))}
_HEADS = (1, 8)
# RGCN: (relations, bases, blocks): few bases of many relations, and about one per relation
_RELATIONS = ((8, 2, 2), (32, 30, 8))
REGIMES = tuple(_WIDTHS)


def regime_of(in_width: int, out_width: int) -> str | None:
    """The width regime of a layer, or None when in == out (both regimes apply)."""
    if in_width == out_width:
        return None
    return "in<out" if in_width < out_width else "in>out"


@dataclass(frozen=True)
class Pruned:
    """The pruning verdict for one composition (index into the enumerated list)."""

    index: int
    composition: Composition
    kept: bool
    reason: str  # "kept", "duplicate of #k", "dominated by #k" (or "#j when in<out, ...")
    wins_when: tuple[str, ...]  # regimes where it is not dominated (empty when dropped)


def _points(regime: str) -> list[dict[str, float]]:
    return [dict(Nd=n, Ns=n, E=e, I=i, O=o, D=o, H=h, R=r, B=b, Ib=i / nb)
            for n, e in _GRAPHS for i, o in _WIDTHS[regime] for h in _HEADS
            for r, b, nb in _RELATIONS]


def _signature(composition: Composition, points: list[dict[str, float]]):
    """Per point: for each primitive kind, its calls' sizes, largest first."""
    prims = primitives(composition)
    out = []
    for values in points:
        by_kind = defaultdict(list)
        for prim in prims:
            size = 1.0
            for _, dims in prim.sizes:
                size *= bind(dims, values)
            by_kind[prim.name].append(size)
        out.append({k: sorted(v, reverse=True) for k, v in by_kind.items()})
    return out


def _dominates(a, b) -> bool:
    """a <= b at every point (fewer or equal calls, each no larger), strictly somewhere."""
    strict = False
    for point_a, point_b in zip(a, b, strict=True):
        for kind, sizes in point_a.items():
            other = point_b.get(kind, [])
            if len(sizes) > len(other) or any(x > y for x, y in zip(sizes, other)):
                return False
        strict = strict or point_a != point_b
    return strict


def prune(compositions: list[Composition]) -> list[Pruned]:
    """One verdict per composition; the first (the default) is never a duplicate."""
    signatures = {r: [_signature(c, _points(r)) for c in compositions] for r in REGIMES}
    first_seen: dict[str, int] = {}
    verdicts = []
    for index, composition in enumerate(compositions):
        key = repr([signatures[r][index] for r in REGIMES])
        if key in first_seen:
            verdicts.append(Pruned(index, composition, False,
                                   f"duplicate of #{first_seen[key]}", ()))
            continue
        first_seen[key] = index
        wins, beaten_by = [], {}
        for regime in REGIMES:
            sig = signatures[regime]
            winner = next((j for j in first_seen.values() if j != index
                           and _dominates(sig[j], sig[index])), None)
            if winner is None:
                winner = next((j for j in range(len(compositions)) if j != index
                               and _dominates(sig[j], sig[index])), None)
            if winner is None:
                wins.append(regime)
            else:
                beaten_by[regime] = winner
        if wins:
            verdicts.append(Pruned(index, composition, True, "kept", tuple(wins)))
        else:
            winners = set(beaten_by.values())
            reason = (f"dominated by #{winners.pop()}" if len(winners) == 1 else "dominated by "
                      + ", ".join(f"#{j} when {r}" for r, j in beaten_by.items()))
            verdicts.append(Pruned(index, composition, False, reason, ()))
    return verdicts
