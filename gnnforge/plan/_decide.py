"""The decision rule: leave the default plan only for a predicted gain that clears the
uncertainty of that very prediction.

A plan's predicted cost is a sum of per-primitive predictions, and each primitive model
has its own error on graphs it never saw (held-out RMS log error: ~0.2 for GEMM, ~0.4-0.6
for the sparse primitives). Two plans of a layer share calls (GCN's four plans all run
the same GEMM when the widths are equal); only the calls that differ can make the
predicted ratio wrong. With w_i = (seconds of differing call i) / (its plan's cost),
signed + for the default's calls and - for the candidate's, the gain
log(C_default / C_plan) has the spread

    spread^2 = sum_ij w_i w_j scale_i scale_j corr_ij

with `scale` the primitive's held-out RMS log error and `corr` the correlation of two
calls' held-out errors on one graph: measured for two primitives at the same width
(0.6-0.8 for the unweighted and weighted SpMM) and for one primitive at two widths
(-0.1 to 0.6), 0 otherwise. A candidate's lower bound is gain - caution x spread; the
highest lower bound wins if it clears the margin (0 for profiled models:
`_calibrate.decision_rule`), else the default stays. Where the differing calls are a
small share of both plans (GCN 2048 -> 32: the plans differ in the width-32 aggregation
next to a 2048-wide GEMM) a few percent of predicted gain is trustworthy; where they are
most of the cost (256 -> 256, precomputed vs dynamic normalisation) 15% may not be. One
global margin cannot tell the two apart.

Plans with identical calls (the same work in another order) tie; the earlier candidate
wins (the default first).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Calls", "Rule", "choose", "gain_spread", "in_doubt"]

T = TypeVar("T")
# A plan's primitive calls: key (primitive, bound sizes) -> (primitive, seconds each, count,
# width: `_cost.call_width`)
Calls = Mapping[Hashable, tuple[str, float, int, int]]
_TIE = 1e-9  # a lower bound must beat the best so far by more than float rounding


@dataclass(frozen=True)
class Rule:
    """The calibrated decision rule (`gnnforge plan profile` measures it).

    Attributes:
        margin: log-gain the lower bound must exceed to leave the default.
        caution: multiples of a gain's spread subtracted before comparing (0: trust the
            point prediction).
    """

    margin: float = 0.0
    caution: float = 0.0

    def __post_init__(self) -> None:
        if not (self.margin >= 0 and self.caution >= 0):
            raise ValueError(f"Rule: margin and caution must be >= 0, got margin={self.margin}, "
                             f"caution={self.caution}")


def gain_spread(default: Calls, plan: Calls, scales: Mapping[str, float],
                correlations: Mapping[str, Mapping[str, float]] | None = None) -> float:
    """Standard error (log space) of the predicted gain log(C_default / C_plan).

    Args:
        default, plan: each plan's calls (`Calls`); shared calls cancel.
        scales: primitive -> held-out RMS log error of its model (missing: 0).
        correlations: primitive -> primitive -> correlation of their held-out errors on
            one graph: for two primitives at the same width, and for a primitive with
            itself at two widths (missing: 0). Calls of one primitive at one width
            count as fully correlated, of different primitives at different widths as
            uncorrelated.
    """
    correlations = correlations or {}
    terms: list[tuple[str, int, float]] = []  # (primitive, width, signed share x scale)
    for mine, other, sign in ((default, plan, 1.0), (plan, default, -1.0)):
        total = sum(call[1] * call[2] for call in mine.values())
        for key, (name, seconds, count, width) in mine.items():
            extra = count - (other[key][2] if key in other else 0)
            if extra > 0 and total > 0:
                terms.append((name, width, sign * extra * seconds / total
                              * scales.get(name, 0.0)))
    variance = 0.0
    for i, (name_i, width_i, w_i) in enumerate(terms):
        for j, (name_j, width_j, w_j) in enumerate(terms):
            if name_i == name_j and width_i == width_j:  # one model at one width
                corr = 1.0
            elif name_i == name_j or width_i == width_j:  # measured pairs
                corr = correlations.get(name_i, {}).get(name_j, 0.0)
            else:  # different models at different widths: unrelated
                corr = 0.0
            variance += w_i * w_j * corr
    return math.sqrt(max(variance, 0.0))


def choose(plans: Sequence[T], costs: Sequence[float], margin: float = 0.0,
           spreads: Sequence[float] | None = None, caution: float = 0.0) -> T:
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

    Returns:
        The chosen plan; on a tie the earlier one.

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
        if score > bound * (1 + _TIE) + _TIE:
            best, bound = j, score
    return plans[best]


def in_doubt(costs: Sequence[float], spreads: Sequence[float], caution: float) -> list[int]:
    """Indices of the candidates that may be the fastest, given the predictions' errors.

    Candidate j's gain over the default is known to within caution x spreads[j]; the best
    lower bound (the default's is 0) is what any candidate must be able to reach: j
    survives when its gain plus caution x spread does. One survivor: the prediction is
    trusted. Several: the predicted gain is within the models' error, and the planner
    measures them (`_race.Race`). Ordered by predicted cost, the cheapest first.

    Raises:
        ValueError: for a negative caution or lengths that differ.
    """
    if caution < 0 or len(costs) != len(spreads) or not costs:
        raise ValueError(f"in_doubt: need one spread per cost (got {len(spreads)} for "
                         f"{len(costs)}) and a caution >= 0 (got {caution})")
    gains = [math.log(costs[0] / c) for c in costs]
    spread = [0.0, *spreads[1:]]
    floor = max(g - caution * s for g, s in zip(gains, spread))
    alive = [j for j, (g, s) in enumerate(zip(gains, spread))
             if g + caution * s >= floor - _TIE]
    return sorted(alive, key=lambda j: (costs[j], j))
