"""Layer-level timing of candidate plans, and the decision margin measured from it.

The cost models are trained per primitive; what a decision needs is the ratio of two
plans' costs. `decision_errors` measures predicted against measured ratios on graphs the
models never saw, and `decision_margin` turns them into the predicted gain `choose`
requires before it leaves the default plan.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from gnnforge.plan._primitives import Composition

__all__ = ["CALIBRATION_WIDTHS", "MIN_GAIN", "decision_errors", "decision_margin",
           "decision_rule", "layer_iteration", "layer_overheads", "tie_preferences", "time_plans"]

CALIBRATION_WIDTHS = ((32, 256), (256, 32), (256, 256), (64, 1024), (1024, 64))
# The decision rule's margin: a predicted gain of 1% or less is below what the calibration
# timings resolve, so it never leaves the default on its own.
MIN_GAIN = 0.01
_CAUTIONS = tuple(round(0.05 * i, 2) for i in range(81))  # 0, 0.05, ..., 4


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


def _seconds(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def time_plans(layer: nn.Module, graph: Any, x: torch.Tensor, training: bool,
               plans: Sequence[Composition], samples: int, min_seconds: float = 0.0,
               max_samples: int = 40
               ) -> tuple[dict[Composition, float], dict[Composition, list[float]]]:
    """Time each plan of `layer`: its first run, then runs in interleaved rounds.

    Rounds interleave the plans (plan 1, plan 2, ..., then plan 2, ..., plan 1, ...: each
    round starts one plan later), so a slow phase of a shared machine hits every plan
    alike instead of biasing whichever ran then, and no plan always runs first. There
    are at least `samples` rounds, and more (up to `max_samples`) while the rounds so
    far took less than `min_seconds`: fast layers get more runs, which their noisier
    timings need, at little cost. Call once on the graph before (warm-up of per-graph
    caches and kernel compilation).

    Returns:
        (first run seconds per plan, the runs' seconds per plan).
    """
    if samples < 1 or max_samples < samples:
        raise ValueError(f"time_plans: need 1 <= samples <= max_samples, got samples="
                         f"{samples}, max_samples={max_samples}")
    run = layer_iteration(layer, graph, x, training)
    previous = layer.plan
    first: dict[Composition, float] = {}
    times: dict[Composition, list[float]] = {plan: [] for plan in plans}
    try:
        for plan in plans:
            layer.plan = plan
            first[plan] = _seconds(run)
        rounds, spent = 0, 0.0
        while rounds < samples or (spent < min_seconds and rounds < max_samples):
            shift = rounds % len(plans)  # rotate, so no plan always runs first
            for plan in [*plans[shift:], *plans[:shift]]:
                layer.plan = plan
                times[plan].append(_seconds(run))
                spent += times[plan][-1]
            rounds += 1
    finally:
        layer.plan = previous
    return first, times


def _layers(widths: tuple[int, int]) -> list[nn.Module]:
    from gnnforge.nn import GATConv, GCNConv  # nn imports the planner: import on use

    return [GCNConv(*widths), GATConv(*widths, heads=1)]


def layer_overheads(samples: int = 21) -> dict[str, dict[str, float]]:
    """Fixed seconds of one layer call, whatever the plan: each planned layer's default
    plan on a 2-node graph at width 1 (argument checks, the plan lookup, Python and
    autograd bookkeeping), median of `samples` runs per mode.

    Per-primitive models price each call's own fixed cost, not this per-layer one; it
    is the same for every candidate, so it never changes which plan is cheapest, but it
    shrinks predicted gains to what they are on small graphs, where it is a large share
    of an iteration (what the decision margin is compared with).
    """
    from gnnforge.graph import Graph
    from gnnforge.nn import GATConv, GATv2Conv, GCNConv, SGConv, TAGConv

    graph = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    out: dict[str, dict[str, float]] = {}
    for make in (lambda: GCNConv(1, 1), lambda: GATConv(1, 1), lambda: GATv2Conv(1, 1),
                 lambda: SGConv(1, 1, K=2), lambda: TAGConv(1, 1, K=3)):
        layer = make()
        modes = {}
        for training in (False, True):
            layer.train(training)
            x = torch.randn(2, 1, requires_grad=training)
            run = layer_iteration(layer, graph, x, training)
            run()
            modes["train" if training else "infer"] = statistics.median(
                _seconds(run) for _ in range(samples))
        out[type(layer).__name__] = modes
    return out


def decision_errors(cost_model: Any, graphs: Iterable[tuple[str, Any]],
                    widths: Sequence[tuple[int, int]] = CALIBRATION_WIDTHS,
                    samples: int = 5, seed: int = 0, progress: bool = True,
                    min_seconds: float = 0.5) -> list[dict]:
    """Predicted vs measured gain of every non-default candidate over the default.

    For each graph x width pair x {inference, training} x {GCN, GAT}, every candidate the
    planner would cost is timed (`time_plans`, median of `samples`) and predicted by
    `cost_model`; a record holds log(predicted default / candidate) and log(measured
    default / candidate). The graphs must be ones the cost model was not trained on.
    """
    from tqdm import tqdm

    from gnnforge.plan._optimize import layer_candidates, optimize

    torch.manual_seed(seed)
    configs = [(name, graph, w, t) for name, graph in graphs for w in widths
               for t in (False, True)]
    records = []
    for name, graph, w, training in tqdm(configs, desc="calibrate", disable=not progress):
        x = torch.randn(graph.num_nodes, w[0], requires_grad=training)
        for layer in _layers(w):
            layer.train(training)
            plans = layer_candidates(layer)
            if len(plans) < 2:
                continue
            layer_iteration(layer, graph, x, training)()  # warm-up
            _, times = time_plans(layer, graph, x, training, plans, samples, min_seconds)
            decision = optimize(layer, graph, training=training, cost_model=cost_model,
                                margin=0.0, caution=0.0, apply=False).decisions[0]
            predicted = dict(decision.costs)
            spread = dict(zip(plans, decision.spreads))
            measured = {p: statistics.median(t) for p, t in times.items()}
            default = plans[0]
            for plan in plans[1:]:
                records.append(dict(
                    graph=name, layer=type(layer).__name__, widths=list(w), training=training,
                    plan=str(plan), default=str(default),
                    predicted_gain=math.log(predicted[default] / predicted[plan]),
                    spread=spread[plan],
                    measured_gain=math.log(measured[default] / measured[plan])))
    return records


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


def _configs(records: Sequence[dict]) -> list[tuple[str, bool, list[tuple[str, float, float,
                                                                       float]]]]:
    """Per configuration: layer, mode and (plan, predicted gain, spread, measured gain) of
    every candidate, the default first (gain 0 both ways)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["graph"], r["layer"], tuple(r["widths"]), r["training"]),
                          []).append(r)
    return [(key[1], key[3], [(group[0]["default"], 0.0, 0.0, 0.0)]
             + [(r["plan"], r["predicted_gain"], r["spread"], r["measured_gain"])
                for r in group]) for key, group in groups.items()]


def _mode(training: bool) -> str:
    return "train" if training else "infer"


def tie_preferences(records: Sequence[dict], tolerance: float = 0.05
                    ) -> dict[str, dict[str, list[str]]]:
    """Per layer and mode, plans best first for ties in predicted cost (the same calls in
    another order, which per-primitive models cannot separate).

    Within each calibration configuration's tied groups a plan scores its measured gain
    minus the group's mean; plans rank by their mean score. The default stays ahead of
    any plan that lost more than `tolerance` to it in a tie.
    """
    scores: dict[tuple[str, str], dict[str, list[float]]] = {}
    losers: dict[tuple[str, str], set[str]] = {}
    for layer, training, entries in _configs(records):
        key = (layer, _mode(training))
        for group in _tie_groups(entries):
            mean = statistics.fmean(e[3] for e in group)
            for plan, _, _, measured in group:
                scores.setdefault(key, {}).setdefault(plan, []).append(measured - mean)
            if any(e[0] == entries[0][0] for e in group):  # tied with the default
                losers.setdefault(key, set()).update(
                    e[0] for e in group if e[3] < math.log(1 - tolerance))
    out: dict[str, dict[str, list[str]]] = {}
    defaults = {(layer, _mode(t)): entries[0][0] for layer, t, entries in _configs(records)}
    for (layer, mode), plans in scores.items():
        order = sorted(plans, key=lambda p: -statistics.fmean(plans[p]))
        default = defaults[(layer, mode)]
        bad = losers.get((layer, mode), set())
        if default in order and bad:  # never prefer a plan that lost to the default
            order.remove(default)
            first_bad = min((order.index(p) for p in bad if p in order), default=len(order))
            order.insert(min(first_bad, len(order)), default)
        out.setdefault(layer, {})[mode] = order
    return out


def _tie_groups(entries: list[tuple[str, float, float, float]]) -> list[list[tuple]]:
    groups: list[list[tuple]] = []
    for entry in sorted(entries, key=lambda e: (e[1], e[2])):
        last = groups[-1][-1] if groups else None
        if last is not None and abs(entry[1] - last[1]) < 1e-9 and abs(entry[2] - last[2]) < 1e-9:
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return [g for g in groups if len(g) > 1]


def _pick(entries: list[tuple[str, float, float, float]], margin: float, caution: float,
          preference: Sequence[str]) -> tuple[str, float, float, float]:
    """The entry `choose` picks from predicted gains and spreads (costs exp(-gain))."""
    from gnnforge.plan._decide import choose

    return choose(entries, [math.exp(-e[1]) for e in entries], margin,
                  [e[2] for e in entries], caution, preference)


def decision_rule(records: Sequence[dict], tolerance: float = 0.05,
                  margin: float = MIN_GAIN) -> tuple[float, float]:
    """(margin, caution) for `choose`: the smallest caution with which no calibration
    configuration's pick (ties broken by `tie_preferences`) measured more than
    `tolerance` slower than the default; the margin stays `margin`.

    Should no caution up to 4 suffice (a loss whose plan has no spread: the same calls as
    the default), the margin rises to the largest cautious gain that lost.

    Raises:
        ValueError: with no records, or records without spreads (older calibration).
    """
    if not records:
        raise ValueError("decision_rule: no calibration records")
    if any("spread" not in r or "default" not in r for r in records):
        raise ValueError("decision_rule: records lack 'spread' / 'default' (re-run the "
                         "calibration with this version)")
    preferences = tie_preferences(records, tolerance)
    configs = [(entries, preferences.get(layer, {}).get(_mode(t), []))
               for layer, t, entries in _configs(records)]
    floor = math.log(1 - tolerance)

    def losses(m: float, k: float) -> list[float]:
        picks = [_pick(entries, m, k, preference) for entries, preference in configs]
        return [p[1] - k * p[2] for p in picks if p[3] < floor]

    for caution in _CAUTIONS:
        if not losses(margin, caution):
            return margin, caution
    caution = _CAUTIONS[-1]
    while (lost := losses(margin, caution)) and max(lost) > margin:
        margin = max(lost)
    return margin, caution
