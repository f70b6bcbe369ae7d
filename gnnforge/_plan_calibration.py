"""The planner's decision margin measured on the library's own layers (`gnnforge plan`).

`decision_errors` times every candidate plan of GCN, GAT and SAGE layers on held-out
graphs and compares the measured gains with the cost model's predictions; the decision
rule (`gnnforge.plan._calibrate.decision_rule`) is fitted on those records.
`layer_overheads` measures the fixed cost of one call of each planned layer. Both
instantiate gnnforge.nn layers, so they sit above nn and the planner: the planner's own
timing helpers (`gnnforge.plan._calibrate`) take any layer and import none.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GATv2Conv, GCNConv, GINConv, RGCNConv, SAGEConv, SGConv, TAGConv
from gnnforge.plan._calibrate import (
    CALIBRATION_WIDTHS,
    half_difference,
    layer_iteration,
    seconds,
    time_plans,
)
from gnnforge.plan._optimize import layer_candidates, optimize

__all__ = ["decision_errors", "layer_overheads"]


def _layers(widths: tuple[int, int]) -> list[nn.Module]:
    return [GCNConv(*widths), GATConv(*widths, heads=1), SAGEConv(*widths)]


def layer_overheads(samples: int = 21) -> dict[str, dict[str, float]]:
    """Fixed seconds of one layer call, whatever the plan: each planned layer's default
    plan on a 2-node graph at width 1 (argument checks, the plan lookup, Python and
    autograd bookkeeping), median of `samples` runs per mode.

    Per-primitive models price each call's own fixed cost, not this per-layer one; it
    is the same for every candidate, so it never changes which plan is cheapest, but it
    shrinks predicted gains to what they are on small graphs, where it is a large share
    of an iteration (what the decision margin is compared with).
    """
    # typed for RGCN (the other layers ignore edge types)
    graph = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2, edge_type=torch.tensor([0, 0]))
    out: dict[str, dict[str, float]] = {}
    for make in (lambda: GCNConv(1, 1), lambda: GATConv(1, 1), lambda: GATv2Conv(1, 1),
                 lambda: SGConv(1, 1, K=2), lambda: TAGConv(1, 1, K=3),
                 lambda: SAGEConv(1, 1), lambda: GINConv(nn.Linear(1, 1)),
                 lambda: RGCNConv(1, 1, num_relations=1)):
        layer = make()
        layer.plan = "default"  # the fixed cost of a call, not of planning one
        modes = {}
        for training in (False, True):
            layer.train(training)
            x = torch.randn(2, 1, requires_grad=training)
            run = layer_iteration(layer, graph, x, training)
            run()
            modes["train" if training else "infer"] = statistics.median(
                seconds(run) for _ in range(samples))
        out[type(layer).__name__] = modes
    return out


def decision_errors(cost_model: Any, graphs: Iterable[tuple[str, Any]],
                    widths: Sequence[tuple[int, int]] = CALIBRATION_WIDTHS,
                    samples: int = 5, seed: int = 0, progress: bool = True,
                    min_seconds: float = 0.5) -> list[dict]:
    """Predicted vs measured gain of every non-default candidate over the default.

    For each graph x width pair x {inference, training} x {GCN, GAT, SAGE}, every candidate the
    planner would cost is timed (`time_plans`, median of `samples`) and predicted by
    `cost_model`; a record holds log(predicted default / candidate) and log(measured
    default / candidate). The graphs must be ones the cost model was not trained on.
    """
    from tqdm import tqdm

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
                    measured_gain=math.log(measured[default] / measured[plan]),
                    timing_noise=half_difference(times[default], times[plan])))
    return records
