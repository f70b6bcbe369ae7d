"""Online planning: cost every candidate of every layer on this graph, choose, apply.

Planning is three pure functions (`candidates` enumerates, `cost_plans` / `predict_calls`
cost, `choose` picks: see `_decide`) plus `optimize`, which runs them for a model and sets
each layer's `plan`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from torch import nn

from gnnforge.graph import Graph
from gnnforge.plan._candidates import candidates, default_composition
from gnnforge.plan._cost import CostModel, call_width, design_row, shipped_models_dir, work
from gnnforge.plan._decide import Rule, choose, gain_spread
from gnnforge.plan._features import graph_features
from gnnforge.plan._primitives import Composition, bind, primitives

__all__ = ["LayerDecision", "Plan", "choose", "cost_plans", "decide_layers",
           "layer_candidates", "layer_symbols", "optimize", "planned_layers", "predict_calls"]

_DEFAULT_MODELS: dict[Path, CostModel] = {}


def _default_model() -> CostModel:
    """The shipped models for this process's thread count, each folder read once
    (reading the boosters costs more than a decision)."""
    folder = shipped_models_dir()
    if folder not in _DEFAULT_MODELS:
        _DEFAULT_MODELS[folder] = CostModel.load(folder)
    return _DEFAULT_MODELS[folder]


@dataclass(frozen=True)
class LayerDecision:
    """One layer's decision: every candidate with its predicted seconds, and the choice."""

    name: str
    layer: str
    widths: tuple[int, int]
    costs: tuple[tuple[Composition, float], ...]
    chosen: Composition
    default: Composition
    spreads: tuple[float, ...] = ()  # per candidate: its gain's spread against the default
    # per candidate: its primitive calls with their predicted seconds (`_decide.Calls`)
    calls: tuple[dict, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Plan:
    """What `optimize` decided; prints as a table. `overhead_s`: features + prediction."""

    decisions: tuple[LayerDecision, ...]
    training: bool
    overhead_s: float
    features: dict[str, float]
    margin: float = 0.0
    caution: float = 0.0

    def __str__(self) -> str:
        lines = [f"plan ({'training' if self.training else 'inference'}; graph "
                 f"{int(self.features['num_dst_nodes'])} nodes, "
                 f"{int(self.features['num_edges'])} edges; planning took "
                 f"{self.overhead_s * 1e3:.2f} ms; leaves the default only for a predicted gain "
                 f"above {math.exp(self.margin) - 1:.0%}"
                 + (f" + {self.caution:.2f} x its spread" if self.caution else "") + ")"]
        for d in self.decisions:
            lines.append(f"  {d.name}: {d.layer} {d.widths[0]} -> {d.widths[1]}")
            base = dict(d.costs)[d.default]
            spreads = dict(zip((c for c, _ in d.costs), d.spreads))
            for composition, seconds in sorted(d.costs, key=lambda item: item[1]):
                marks = ("* " if composition == d.chosen else "  ") + (
                    "(default) " if composition == d.default else "")
                gain = "" if composition == d.default else (
                    f"  gain {math.log(base / seconds):+.3f} +- {spreads.get(composition, 0):.3f}")
                lines.append(f"    {marks}{seconds * 1e3:9.3f} ms{gain}  {composition}")
        return "\n".join(lines)


def planned_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, layer) for every sub-module that runs a plan (has a plan_expression; a
    SAGEConv with the max aggregator has none)."""
    return [(name or type(m).__name__, m) for name, m in model.named_modules()
            if hasattr(m, "plan_expression") and hasattr(m, "plan")
            and m.plan_expression() is not None]


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


def predict_calls(plans: list[list[Composition]], symbols: list[dict[str, float]],
                  features: list[dict[str, float]], training: bool,
                  model: CostModel, amortized: list[bool] | None = None) -> list[list[dict]]:
    """Each plan's primitive calls with their predicted seconds (`_decide.Calls`).

    Batched: one model walk for every distinct primitive call of every plan of every
    layer (a call shared by several plans, such as the projection GEMM, is predicted once).
    `amortized[i]`: layer i runs on a fixed graph, so calls made once per graph (GCN's
    edge normalisation, cached with the graph) cost nothing per iteration.
    """
    calls: dict[tuple, int] = {}  # (layer's features, primitive, bound sizes) -> call number
    names, rows, works, widths = [], [], [], []
    members = []  # per layer, per plan: {call number: count}
    amortized = amortized or [False] * len(plans)
    for layer_plans, values, graph, fixed in zip(plans, symbols, features, amortized):
        members.append([])
        for plan in layer_plans:
            counts: dict[int, int] = {}
            for prim in _primitives(plan):
                if prim.once and fixed:
                    continue
                sizes = tuple((size, bind(dims, values)) for size, dims in prim.sizes)
                key = (id(graph), prim.name, sizes)
                if key not in calls:
                    calls[key] = len(names)
                    names.append(prim.name)
                    bound = dict(sizes)
                    rows.append(design_row(prim.name, bound, graph, training))
                    works.append(work(prim.name, bound, graph))
                    widths.append(call_width(prim.name, bound, graph))
                counts[calls[key]] = counts.get(calls[key], 0) + 1
            members[-1].append(counts)
    seconds = model.predict_many(names, rows, works) if names else []
    return [[{i: (names[i], float(seconds[i]), n, widths[i]) for i, n in counts.items()}
             for counts in layer] for layer in members]


def cost_plans(plans: list[list[Composition]], symbols: list[dict[str, float]],
               features: list[dict[str, float]], training: bool,
               model: CostModel) -> list[list[float]]:
    """Predicted seconds of each plan: the sum of its primitives' predictions."""
    return [[sum(call[1] * call[2] for call in plan.values()) for plan in layer]
            for layer in predict_calls(plans, symbols, features, training, model)]


_primitives = cache(primitives)  # a composition's primitives never change


def _rule(cost_model: Any, margin: float | None, caution: float | None) -> Rule:
    """The cost model's calibrated rule (duck-typed: test models may lack parts of it)."""
    return Rule(getattr(cost_model, "decision_margin", 0.0) if margin is None else margin,
                getattr(cost_model, "decision_caution", 0.0) if caution is None else caution)


def _spreads(calls: list[dict], cost_model: Any) -> list[float]:
    scales = getattr(cost_model, "error_scales", dict)()
    correlations = getattr(cost_model, "error_correlations", dict)()
    return [0.0] + [gain_spread(calls[0], plan, scales, correlations) for plan in calls[1:]]


def layer_symbols(layer: nn.Module, features: dict[str, float]) -> dict[str, float]:
    """The layer's width symbols bound with the graph's sizes."""
    return {**layer.plan_symbols(), "Nd": features["num_dst_nodes"],
            "Ns": features["num_src_nodes"], "E": features["num_edges"]}


def decide_layers(layers: list[tuple[str, nn.Module]], features: list[dict[str, float]],
                  training: bool, cost_model: Any, rule: Rule,
                  amortized: list[bool] | None = None) -> list[LayerDecision]:
    """Cost every candidate of every layer (one batched prediction) and choose.

    Args:
        layers: (name, layer) pairs. features: per layer, the graph it runs on (after
            its self-loop handling). amortized: per layer, whether the graph is fixed
            (once-per-graph calls are then free).
    """
    plans = [layer_candidates(layer) for _, layer in layers]
    symbols = [layer_symbols(layer, f) for (_, layer), f in zip(layers, features)]
    calls = predict_calls(plans, symbols, features, training, cost_model, amortized)
    fixed = getattr(cost_model, "layer_overhead", lambda layer, training: 0.0)
    decisions = []
    for (name, layer), layer_plans, layer_calls in zip(layers, plans, calls):
        extra = fixed(type(layer).__name__, training)  # the same for every plan
        # floored: a graph without nodes predicts no work at all, and ratios need a cost
        costs = [max(extra + sum(call[1] * call[2] for call in c.values()), 1e-12)
                 for c in layer_calls]
        for c in layer_calls:  # a call every plan makes: shrinks gains to their real size
            c["layer"] = ("layer", extra, 1, 0)
        spreads = _spreads(layer_calls, cost_model)
        pick = choose(layer_plans, costs, rule.margin, spreads, rule.caution)
        symbols_ = layer.plan_symbols()
        decisions.append(LayerDecision(name, type(layer).__name__, (symbols_["I"], symbols_["O"]),
                                       tuple(zip(layer_plans, costs)), pick,
                                       default_composition(layer.plan_expression()),
                                       tuple(spreads), tuple(layer_calls)))
    return decisions


def _layer_graphs(layers: list, graph: Any) -> list[Any]:
    """The graph each planned layer runs on: `graph` for all, or one block per layer."""
    if not isinstance(graph, list | tuple):
        return [graph] * len(layers)
    if len(graph) != len(layers):
        names = ", ".join(name for name, _ in layers)
        raise ValueError(f"optimize: got {len(graph)} graphs or blocks for {len(layers)} "
                         f"planned layers ({names}); pass one per planned layer, in order")
    return list(graph)


def optimize(model: nn.Module, graph: Any, *, training: bool | None = None,
             cost_model: CostModel | None = None, margin: float | None = None,
             caution: float | None = None, apply: bool = True) -> Plan:
    """Choose each planned layer's composition for `graph` and set `layer.plan`.

    The cost of a plan is the sum of its primitives' predicted costs (SENSEi, Lenadora
    et al.). Layers left at `plan="auto"` plan themselves on first use (and measure when
    the models are in doubt); `optimize` is the explicit, prediction-only form, for a
    plan chosen ahead of time or printed.

    Args:
        model: a module containing planned layers (GCNConv, SGConv, TAGConv, GATConv,
            GATv2Conv, SAGEConv, ...).
        graph: the Graph (or block) every layer runs on, or a list with one graph or
            sampler block per planned layer, in module order (sampled training: layer l
            runs on blocks[l]).
        training: cost forward + backward (default: `model.training`).
        cost_model: defaults to the models shipped with gnnforge.
        margin: log-gain the cautious gain must exceed to leave the default plan (see
            `choose`); default: the cost model's `decision_margin`, measured when it was
            profiled.
        caution: multiples of each gain's spread (its uncertainty under the primitive
            models' held-out errors) subtracted before comparing; default: the cost
            model's `decision_caution`. `margin=0.0, caution=0.0` picks the cheapest.
        apply: set each layer's `plan` (False only reports).

    Returns:
        A printable Plan with each layer's candidates, predicted costs and choice.

    Raises:
        ValueError: when the model has no planned layer, or a list of blocks does not
            have one block per planned layer.
    """
    layers = planned_layers(model)
    if not layers:
        raise ValueError(f"optimize: {type(model).__name__} has no layer that runs a plan "
                         "(GCNConv, SGConv, TAGConv, GATConv, GATv2Conv, SAGEConv, GINConv, "
                         "RGCNConv)")
    graphs = _layer_graphs(layers, graph)
    training = model.training if training is None else training
    cost_model = _default_model() if cost_model is None else cost_model
    start = time.perf_counter()
    raw_by_graph: dict[int, dict[str, float]] = {}
    features = []
    for (_, layer), g in zip(layers, graphs):
        if id(g) not in raw_by_graph:
            raw_by_graph[id(g)] = graph_features(g)
        raw = raw_by_graph[id(g)]
        looped = isinstance(g, Graph) and getattr(layer, "add_self_loops", False)
        features.append(_with_self_loops(raw, int(raw["num_self_loops"])) if looped else raw)
    rule = _rule(cost_model, margin, caution)
    decisions = decide_layers(layers, features, training, cost_model, rule,
                              [isinstance(g, Graph) for g in graphs])
    overhead = time.perf_counter() - start
    if apply:
        for (_, layer), decision in zip(layers, decisions):
            layer.plan = decision.chosen
    return Plan(tuple(decisions), training, overhead, raw_by_graph[id(graphs[0])],
                rule.margin, rule.caution)
