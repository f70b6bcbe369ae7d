"""The decision rule: leave the default plan only for a predicted gain that clears the
uncertainty of that very prediction.

A plan's predicted cost is a sum of per-primitive predictions, and each primitive model
has its own error on graphs it never saw (held-out log errors: ~0.2 for GEMM, ~0.4-0.6
for the sparse primitives). Two plans of a layer share calls (GCN's four plans all run
the same GEMM when the widths are equal); only the calls that differ can make the
predicted ratio wrong. So the spread of a predicted gain log(C_default / C_plan) is

    spread = sqrt( sum over calls of the default not in the plan (seconds x scale / C_default)^2
                 + sum over calls of the plan not in the default (seconds x scale / C_plan)^2 )

with `scale` the primitive's held-out RMS log error. A plan is a candidate when its lower
bound, gain - caution x spread, clears the margin; the highest lower bound wins. Where
the differing calls are a small share of both plans (GCN 2048 -> 32: the plans differ
in the width-32 aggregation next to a 2048-wide GEMM) a few percent of predicted gain is
trustworthy; where they are most of the cost (256 -> 256, precomputed vs dynamic
normalisation) even 15% is not. One global margin cannot tell the two apart.

Plans with identical primitive calls (the same work in another order) tie on predicted
cost; per-primitive models cannot separate them. Ties go to the plan that measured
faster within such ties on the calibration graphs (`preference`), then to the earlier
candidate (the default first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Hashable, TypeVar

__all__ = ["Calls", "Rule", "choose", "gain_spread"]

T = TypeVar("T")
# A plan's primitive calls: key (primitive, bound sizes) -> (primitive, seconds each, count)
Calls = Mapping[Hashable, tuple[str, float, int]]
_TIE = 1e-9  # relative cost difference below which two plans tie (float rounding only)


@dataclass(frozen=True)
class Rule:
    """The calibrated decision rule (`gnnforge plan profile` measures it).

    Attributes:
        margin: log-gain the lower bound must exceed to leave the default.
        caution: multiples of a gain's spread subtracted before comparing (0: trust the
            point prediction).
        preference: plan names (str of a composition), best first, for ties.
    """

    margin: float = 0.0
    caution: float = 0.0
    preference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (self.margin >= 0 and self.caution >= 0):
            raise ValueError(f"Rule: margin and caution must be >= 0, got margin={self.margin}, "
                             f"caution={self.caution}")


def gain_spread(default: Calls, plan: Calls, scales: Mapping[str, float]) -> float:
    """Standard error (log space) of the predicted gain log(C_default / C_plan).

    Args:
        default, plan: each plan's calls (`Calls`); shared calls cancel.
        scales: primitive -> held-out RMS log error of its model (missing: 0).
    """
    total_default = sum(seconds * count for _, seconds, count in default.values())
    total_plan = sum(seconds * count for _, seconds, count in plan.values())
    variance = 0.0
    for mine, other, total in ((default, plan, total_default), (plan, default, total_plan)):
        for key, (name, seconds, count) in mine.items():
            extra = count - (other[key][2] if key in other else 0)
            if extra > 0 and total > 0:
                variance += (extra * seconds * scales.get(name, 0.0) / total) ** 2
    return math.sqrt(variance)


def _tied(costs: Sequence[float], spreads: Sequence[float], i: int, j: int) -> bool:
    return (abs(costs[i] - costs[j]) <= _TIE * max(costs[i], costs[j])
            and abs(spreads[i] - spreads[j]) <= _TIE * max(spreads[i], spreads[j], 1.0))


def choose(plans: Sequence[T], costs: Sequence[float], margin: float = 0.0,
           spreads: Sequence[float] | None = None, caution: float = 0.0,
           preference: Sequence[str] = ()) -> T:
    """The plan with the best lower-bound gain over `plans[0]` (the default, as
    `candidates` orders them), or the default when no lower bound clears the margin.

    Args:
        plans: the candidates, the default first.
        costs: predicted seconds of each plan.
        margin: log-gain the lower bound log(costs[0] / costs[j]) - caution x spreads[j]
            must exceed to leave the default. 0 with caution 0 picks the cheapest.
        spreads: each plan's `gain_spread` against the default (spreads[0] is unused);
            None: all 0.
        caution: multiples of the spread subtracted from each gain.
        preference: str(plan) in tie-break order, best first; among plans of equal cost
            and spread the best-ranked wins (unranked ones after, in candidate order).

    Raises:
        ValueError: for a negative margin or caution, or lengths that differ.
    """
    spreads = [0.0] * len(plans) if spreads is None else list(spreads)
    if margin < 0 or caution < 0 or not plans or not len(plans) == len(costs) == len(spreads):
        raise ValueError(f"choose: need as many costs and spreads as plans (got {len(costs)} "
                         f"costs, {len(spreads)} spreads for {len(plans)} plans) and a margin "
                         f"and caution >= 0 (got {margin}, {caution})")
    best, bound = 0, margin
    for j in range(1, len(plans)):
        score = math.log(costs[0] / costs[j]) - caution * spreads[j]
        if score > bound:
            best, bound = j, score
    group = [j for j in range(len(plans)) if _tied(costs, spreads, best, j)]
    if len(group) == 1 or not preference:
        return plans[group[0]]
    rank = {name: i for i, name in enumerate(preference)}
    return plans[min(group, key=lambda j: (rank.get(str(plans[j]), len(rank)), j))]
