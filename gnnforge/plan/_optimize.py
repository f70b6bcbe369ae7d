"""Online planning: cost every candidate of every layer on this graph, choose, apply.

Planning is three pure functions (`candidates` enumerates, `cost_plans` costs, `choose`
picks) plus `optimize`, which runs them for a model and sets each layer's `plan`.
"""

from __future__ import annotations

import math
import time
from functools import cache
from dataclasses import dataclass
from typing import Any

from torch import nn

from gnnforge.graph import Graph
from gnnforge.plan._candidates import candidates, default_composition
from gnnforge.plan._cost import CostModel, design_row, work
from gnnforge.plan._features import graph_features
from gnnforge.plan._primitives import Composition, bind, primitives

__all__ = ["LayerDecision", "Plan", "choose", "cost_plans", "layer_candidates", "optimize",
           "planned_layers"]

_DEFAULT_MODEL: CostModel | None = None


def _default_model() -> CostModel:
    global _DEFAULT_MODEL  # loaded once: reading the boosters costs more than a decision
    if _DEFAULT_MODEL is None:
        _DEFAULT_MODEL = CostModel.load()
    return _DEFAULT_MODEL


@dataclass(frozen=True)
class LayerDecision:
    """One layer's decision: every candidate with its predicted seconds, and the choice."""

    name: str
    layer: str
    widths: tuple[int, int]
    costs: tuple[tuple[Composition, float], ...]
    chosen: Composition
    default: Composition


@dataclass(frozen=True)
class Plan:
    """What `optimize` decided; prints as a table. `overhead_s`: features + prediction."""

    decisions: tuple[LayerDecision, ...]
    training: bool
    overhead_s: float
    features: dict[str, float]
    margin: float = 0.0

    def __str__(self) -> str:
        lines = [f"plan ({'training' if self.training else 'inference'}; graph "
                 f"{int(self.features['num_dst_nodes'])} nodes, "
                 f"{int(self.features['num_edges'])} edges; planning took "
                 f"{self.overhead_s * 1e3:.2f} ms; leaves the default only for a predicted gain "
                 f"above {math.exp(self.margin) - 1:.0%})"]
        for d in self.decisions:
            lines.append(f"  {d.name}: {d.layer} {d.widths[0]} -> {d.widths[1]}")
            for composition, seconds in sorted(d.costs, key=lambda item: item[1]):
                marks = ("* " if composition == d.chosen else "  ") + (
                    "(default) " if composition == d.default else "")
                lines.append(f"    {marks}{seconds * 1e3:9.3f} ms  {composition}")
        return "\n".join(lines)


def planned_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, layer) for every sub-module that runs a plan (has plan_expression)."""
    return [(name or type(m).__name__, m) for name, m in model.named_modules()
            if hasattr(m, "plan_expression") and hasattr(m, "plan")]


def layer_candidates(layer: nn.Module) -> list[Composition]:
    """The pruned compositions that can win for this layer's widths."""
    symbols = layer.plan_symbols()  # the regime compares the input with the per-head width
    return candidates(layer.plan_expression(), symbols["I"], symbols["D"])


def _with_self_loops(features: dict[str, float], num_loops: int) -> dict[str, float]:
    """Features of the graph after PyG's loop handling (one loop per node), in O(1)."""
    out = dict(features)
    nodes = features["num_dst_nodes"]
    out["num_edges"] = features["num_edges"] - num_loops + nodes
    shift = (nodes - num_loops) / max(nodes, 1)  # mean in-degree gained
    out["degree_mean"] += shift
    out["degree_max"] += 1.0
    out["density"] = out["num_edges"] / max(features["num_src_nodes"] * nodes, 1)
    return out


def cost_plans(plans: list[list[Composition]], symbols: list[dict[str, float]],
               features: list[dict[str, float]], training: bool,
               model: CostModel) -> list[list[float]]:
    """Predicted seconds of each plan: the sum of its primitives' predictions.

    Batched: one model walk for every primitive call of every plan of every layer.
    """
    owners, names, rows, works = [], [], [], []
    for layer, (layer_plans, values, graph) in enumerate(zip(plans, symbols, features)):
        for index, plan in enumerate(layer_plans):
            for prim in _primitives(plan):
                sizes = {key: bind(dims, values) for key, dims in prim.sizes}
                owners.append((layer, index))
                names.append(prim.name)
                rows.append(design_row(prim.name, sizes, graph, training))
                works.append(work(prim.name, sizes, graph))
    totals = [[0.0] * len(p) for p in plans]
    seconds = model.predict_many(names, rows, works) if names else []
    for (layer, index), value in zip(owners, seconds):
        totals[layer][index] += float(value)
    return totals


_primitives = cache(primitives)  # a composition's primitives never change


def choose(plans: list[Composition], costs: list[float], margin: float = 0.0) -> Composition:
    """The cheapest plan, unless it is predicted to beat `plans[0]` (the default, as
    `candidates` orders them) by less than the margin: then the default.

    Args:
        plans: the candidates, the default first.
        costs: predicted seconds of each plan.
        margin: log-ratio the predicted gain must exceed to leave the default; the cost
            models' held-out error on such ratios (`CostModel.decision_margin`). 0 picks
            the cheapest outright (the first on a tie).

    Raises:
        ValueError: for a negative margin or `plans` and `costs` of different lengths.
    """
    if margin < 0 or len(plans) != len(costs) or not plans:
        raise ValueError(f"choose: need as many costs as plans (got {len(costs)} for "
                         f"{len(plans)}) and a margin >= 0 (got {margin})")
    best = min(range(len(plans)), key=costs.__getitem__)
    if best != 0 and costs[best] * math.exp(margin) >= costs[0]:
        return plans[0]
    return plans[best]


def optimize(model: nn.Module, graph: Any, *, training: bool | None = None,
             cost_model: CostModel | None = None, margin: float | None = None,
             apply: bool = True) -> Plan:
    """Choose each planned layer's composition for `graph` and set `layer.plan`.

    Every layer is assumed to run on `graph` (full-graph training or inference). The cost
    of a plan is the sum of its primitives' predicted costs (SENSEi, Lenadora et al.).

    Args:
        model: a module containing GCNConv/SGConv/TAGConv/GATConv/GATv2Conv layers.
        graph: the Graph (or block) the layers will run on.
        training: cost forward + backward (default: `model.training`).
        cost_model: defaults to the models shipped with gnnforge.
        margin: predicted log-gain needed to leave the default plan (see `choose`);
            default: the cost model's `decision_margin`, measured when it was profiled.
        apply: set each layer's `plan` (False only reports).

    Returns:
        A printable Plan with each layer's candidates, predicted costs and choice.

    Raises:
        ValueError: when the model has no planned layer.
    """
    layers = planned_layers(model)
    if not layers:
        raise ValueError(f"optimize: {type(model).__name__} has no layer that runs a plan "
                         "(GCNConv, SGConv, TAGConv, GATConv, GATv2Conv)")
    training = model.training if training is None else training
    cost_model = _default_model() if cost_model is None else cost_model
    start = time.perf_counter()
    raw = graph_features(graph)
    looped = raw
    if isinstance(graph, Graph) and any(getattr(m, "add_self_loops", False) for _, m in layers):
        looped = _with_self_loops(raw, graph.num_self_loops())
    features, symbols, plans = [], [], []
    for _, layer in layers:
        feats = looped if getattr(layer, "add_self_loops", False) else raw
        features.append(feats)
        symbols.append({**layer.plan_symbols(), "Nd": feats["num_dst_nodes"],
                        "Ns": feats["num_src_nodes"], "E": feats["num_edges"]})
        plans.append(layer_candidates(layer))
    costs = cost_plans(plans, symbols, features, training, cost_model)
    fixed = getattr(cost_model, "layer_overhead", lambda layer, training: 0.0)
    costs = [[c + fixed(type(layer).__name__, training) for c in layer_costs]
             for (_, layer), layer_costs in zip(layers, costs)]
    if margin is None:
        margin = getattr(cost_model, "decision_margin", 0.0)
    chosen = [choose(p, c, margin) for p, c in zip(plans, costs)]
    overhead = time.perf_counter() - start
    decisions = []
    for (name, layer), layer_plans, layer_costs, pick in zip(layers, plans, costs, chosen):
        if apply:
            layer.plan = pick
        symbols_ = layer.plan_symbols()
        decisions.append(LayerDecision(name, type(layer).__name__, (symbols_["I"], symbols_["O"]),
                                       tuple(zip(layer_plans, layer_costs)), pick,
                                       default_composition(layer.plan_expression())))
    return Plan(tuple(decisions), training, overhead, raw, margin)
