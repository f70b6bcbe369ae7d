"""Layer-level timing of candidate plans, and the decision margin measured from it.

The cost models are trained per primitive; what a decision needs is the ratio of two
plans' costs. `gnnforge._plan_calibration.decision_errors` measures predicted against
measured ratios on graphs the models never saw (timing the library's layers with
`time_plans`), and `decision_margin` turns them into the predicted gain `choose` requires
before it leaves the default plan. This module times whatever layer it is given: it
imports no layer (gnnforge.nn sits above the planner).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnforge.plan._primitives import Composition

__all__ = ["CALIBRATION_WIDTHS", "CAUTION_QUANTILE", "decision_margin", "decision_rule",
           "half_difference", "layer_iteration", "rule_losses", "seconds", "time_plans"]

CALIBRATION_WIDTHS = ((32, 256), (256, 32), (256, 256), (64, 1024), (1024, 64))
# The decision rule's lower bound is one-sided at this quantile of the calibration's
# standardised errors: it overstates the gain in 1 pair of 10, and a loss beyond 5% needs
# an error larger still.
CAUTION_QUANTILE = 0.9


def layer_iteration(layer: nn.Module, graph: Any, x: torch.Tensor,
                    training: bool) -> Callable[[], None]:
    """One iteration of `layer` as training or inference runs it: forward (no autograd)
    for inference; forward, a scalar loss and backward for training."""
    if not training:
        def infer() -> None:
            with torch.no_grad():
                layer(graph, x)
        return infer

    def train() -> None:
        layer(graph, x).square().mean().backward()
        layer.zero_grad(set_to_none=True)
        x.grad = None
    return train


def seconds(run: Callable[[], None]) -> float:
    """Wall seconds of one call of `run`."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def time_plans(layer: nn.Module, graph: Any, x: torch.Tensor, training: bool,
               plans: Sequence[Composition], samples: int, min_seconds: float = 0.0,
               max_samples: int = 40, settle: int = 0
               ) -> tuple[dict[Composition, float], dict[Composition, list[float]]]:
    """Time each plan of `layer`: its first run, then runs in interleaved rounds.

    Rounds interleave the plans (plan 1, plan 2, ..., then plan 2, ..., plan 1, ...: each
    round starts one plan later), so a slow phase of a shared machine hits every plan
    alike instead of biasing whichever ran then, and no plan always runs first. There
    are at least `samples` rounds, and more (up to `max_samples`) while the rounds so
    far took less than `min_seconds`: fast layers get more runs, which their noisier
    timings need, at little cost. Call once on the graph before (warm-up of per-graph
    caches and kernel compilation).

    `settle` untimed runs of a plan precede each of its timed runs: a run's page faults
    depend on what the previous run freed (glibc gives freed multi-megabyte tensors back
    to the kernel), so a plan timed after another plan is charged for its neighbour,
    while a plan run for many iterations always follows itself (`gnnforge.plan._race`).

    Returns:
        (first run seconds per plan, the runs' seconds per plan).
    """
    if samples < 1 or max_samples < samples or settle < 0:
        raise ValueError(f"time_plans: need 1 <= samples <= max_samples and settle >= 0, "
                         f"got samples={samples}, max_samples={max_samples}, "
                         f"settle={settle}")
    run = layer_iteration(layer, graph, x, training)
    previous = layer.plan
    first: dict[Composition, float] = {}
    times: dict[Composition, list[float]] = {plan: [] for plan in plans}
    try:
        for plan in plans:
            layer.plan = plan
            first[plan] = seconds(run)
        rounds, spent = 0, 0.0
        while rounds < samples or (spent < min_seconds and rounds < max_samples):
            shift = rounds % len(plans)  # rotate, so no plan always runs first
            for plan in [*plans[shift:], *plans[:shift]]:
                layer.plan = plan
                for _ in range(settle):
                    run()
                times[plan].append(seconds(run))
                spent += times[plan][-1]
            rounds += 1
    finally:
        layer.plan = previous
    return first, times


def half_difference(default: list[float], plan: list[float]) -> float:
    """|gain measured on the odd rounds - gain measured on the even rounds|: how well the
    timings resolve this gain (0 with fewer than 2 rounds)."""
    if min(len(default), len(plan)) < 2:
        return 0.0
    odd = math.log(statistics.median(default[0::2]) / statistics.median(plan[0::2]))
    even = math.log(statistics.median(default[1::2]) / statistics.median(plan[1::2]))
    return abs(odd - even)


def decision_margin(records: Sequence[dict], tolerance: float = 0.05) -> float:
    """The smallest margin with which `choose` never loses more than `tolerance` to the
    default on the calibration configurations.

    Per configuration (graph, layer, widths, mode) the planner would pick the candidate
    of largest predicted gain and leave the default when that gain exceeds the margin.
    Where that candidate measured slower than (1 - tolerance) x the default, the margin
    must be at least its predicted gain; the result is the largest such gain (0 when no
    configuration needs one). A margin from the spread of prediction errors instead
    would over-protect: the large errors are on large predicted gains that still win.

    Raises:
        ValueError: with no records (nothing was measured).
    """
    if not records:
        raise ValueError("decision_margin: no calibration records")
    best: dict[tuple, dict] = {}
    for r in records:
        key = (r["graph"], r["layer"], tuple(r["widths"]), r["training"])
        if key not in best or r["predicted_gain"] > best[key]["predicted_gain"]:
            best[key] = r
    floor = math.log(1 - tolerance)
    losses = [r["predicted_gain"] for r in best.values() if r["measured_gain"] < floor]
    return max([0.0, *losses])


def _configs(records: Sequence[dict]) -> list[list[tuple[str, float, float, float]]]:
    """Per configuration: (plan, predicted gain, spread, measured gain) of every
    candidate, the default first (0 gain both ways)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["graph"], r["layer"], tuple(r["widths"]), r["training"]),
                          []).append(r)
    return [[(group[0]["default"], 0.0, 0.0, 0.0)]
            + [(r["plan"], r["predicted_gain"], r["spread"], r["measured_gain"]) for r in group]
            for group in groups.values()]


def _check(records: Sequence[dict]) -> None:
    if not records:
        raise ValueError("decision rule: no calibration records")
    if any("spread" not in r or "default" not in r for r in records):
        raise ValueError("decision rule: records lack 'spread' / 'default' (re-run the "
                         "calibration with this version)")


def decision_rule(records: Sequence[dict], quantile: float = CAUTION_QUANTILE
                  ) -> tuple[float, float]:
    """(margin, caution) for `choose`: margin 0, and the caution that makes a gain's lower
    bound one-sided at `quantile`.

    The caution is the `quantile` of the standardised over-prediction (predicted -
    measured gain) / spread over the calibration pairs, so a candidate's lower bound
    gain - caution x spread overstates its measured gain in 1 - quantile of them (the
    measured gains carry the calibration's timing noise, so the bound covers it too). A
    statistic of all pairs, unlike the largest loss (what a margin-only rule must
    cover): one noisy timing cannot move it far. Calibrations of the same models, timed
    minutes apart, needed margin-only margins from 0.00 to 0.14; cautions were 1.49-1.73
    (three runs, two of them of the same models). With the caution in the bound, the
    margin is 0: leave the default whenever the bound says the candidate is faster.

    Raises:
        ValueError: with no records, records without spreads (older calibrations) or
            none with a spread, or a quantile outside [0, 1].
    """
    _check(records)
    if not 0 <= quantile <= 1:
        raise ValueError(f"decision_rule: quantile must be in [0, 1], got {quantile}")
    standardised = [(r["predicted_gain"] - r["measured_gain"]) / r["spread"]
                    for r in records if r["spread"] > 0]
    if not standardised:
        raise ValueError("decision_rule: no calibration pair has a spread (no error scales)")
    return 0.0, max(float(np.quantile(standardised, quantile)), 0.0)


def rule_losses(records: Sequence[dict], margin: float, caution: float,
                tolerance: float = 0.05) -> list[dict]:
    """The calibration configurations where `choose` with this rule picks a plan that
    measured more than `tolerance` slower than the default (what the rule risks)."""
    from gnnforge.plan._decide import choose

    _check(records)
    lost = []
    for entries in _configs(records):
        pick = choose(entries, [math.exp(-e[1]) for e in entries], margin,
                      [e[2] for e in entries], caution)
        if pick[3] < math.log(1 - tolerance):
            lost.append(dict(plan=pick[0], predicted_gain=pick[1], spread=pick[2],
                             measured_gain=pick[3]))
    return lost
