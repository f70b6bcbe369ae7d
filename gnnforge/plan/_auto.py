"""Planning on by default: a layer whose `plan` is "auto" chooses its composition on
first use for each (graph, dtype, width, device, training) key and keeps it.

On a key's first call the cost models predict every candidate (`decide_layers`). The
prediction is trusted when one candidate clearly wins: the models match this machine
(`_fingerprint`) and no other candidate's gain is within the models' error
(`_decide.in_doubt`). Otherwise the layer measures: its next calls run the surviving
candidates on the real input (`_race.Race`, timed by `_trial.timed_call`) and lock in
the fastest. Both the planning time and the race's cost (what its calls took beyond the
winner's) are counted in the key's `AutoPlan`; `auto_report(model)` prints them.
What a process reads once (the models, its fingerprint, the cost of a page fault) is
counted apart, in `STARTUP_S`: the first key used to pay the fingerprint's ~1 ms, 2% of
100 iterations of a 0.6 ms layer (Cora, GCN 32 -> 256).

The key's graph part is the graph's size in quarter-octaves (sources, destinations,
edges), not its identity: sampled training makes new blocks every step, of similar
sizes, and they share one decision; a fixed graph always has the same key.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from gnnforge import ops
from gnnforge._static_shapes import lazy_device, static_shapes
from gnnforge.graph import Graph
from gnnforge.plan._candidates import default_composition, is_valid_plan
from gnnforge.plan._decide import in_doubt
from gnnforge.plan._execute import Structure, evaluate
from gnnforge.plan._faults import page_fault_seconds
from gnnforge.plan._features import graph_features
from gnnforge.plan._fingerprint import current_fingerprint, fingerprint_is_read, mismatches
from gnnforge.plan._ir import Node
from gnnforge.plan._optimize import (LayerDecision, _default_model, _rule, decide_layers,
                                     layer_symbols)
from gnnforge.plan._primitives import Composition, bind, primitives
from gnnforge.plan._race import Race
from gnnforge.plan._trial import timed_call

__all__ = ["AUTO", "DEFAULT", "AutoPlan", "AutoSettings", "auto_plans", "auto_report",
           "configure_auto", "plan_key", "run_plan"]

AUTO, DEFAULT = "auto", "default"
_MEASURE_MODES = ("doubt", "always", "never")
# Why an XLA layer keeps the default: its calls are recorded, not run, so a race would
# time the tracing; and the cost models are for the CPU.
_LAZY = "default order: on a lazy XLA device calls are traced, not run, so nothing races"
_MAX_RACERS = 4  # GCN's four orders when both realisations of Â and both regimes are in doubt
# A candidate in doubt whose aggregations are this many times wider than another's, which
# the models also predict cheaper, does not race (below).
_WIDER = 4.0
# A race whose first plan's first timed run spends this share of its time in page faults of
# its own restarts with the default in it, if the default did not race (`AutoPlan`).
_FAULTED = 0.25
# A race plans to spend this share of the budget: it prices calls by the medians of a few
# runs each, and where races on near-ties spent all of their 2% by that count, the
# planner benchmark's own medians priced the same calls at 2.1-3.2% (mostly GCN 256 -> 256,
# four candidates within 10%; 12 of 648 configurations in nine tables, 2026-11-27). At
# three quarters, 2-4 configurations in each pass of the five planner tables (360) still
# came to 2.04-2.37%, re-priced 1.4-1.6x the race's own count; at a half, 1 in 360 (2.15%).
_BUDGET_AIM = 0.5
_IN_DOUBT = "predicted gain within the models' error"
# Two candidates whose primitive calls differ by less than this share of the cheaper's
# predicted seconds do the same work in another order: only the earlier one races.
_SAME_WORK = 0.01


def _race_budget() -> float:
    """The share of `horizon` iterations a race plans to spend (`_BUDGET_AIM` of the
    budget, so that its estimation error stays inside the budget)."""
    return _SETTINGS.budget * _BUDGET_AIM


@dataclass(frozen=True)
class AutoSettings:
    """How "auto" layers plan (`configure_auto` changes them for the process).

    Attributes:
        measure: "doubt" (measure on a fingerprint mismatch or when the predicted gain is
            within the models' error), "always" or "never" (trust the prediction).
        budget: the planning and measuring overhead allowed, as a fraction of `horizon`
            iterations of the best plan.
        horizon: iterations the budget refers to (a 100-epoch full-graph run: 100).
        samples: timed rounds (one run of every candidate each) before measuring may
            lock in a winner.
        max_samples: timed rounds at most, while the best two candidates stay within
            their runs' spread (None: samples + 2).
        cost_model: the cost model (None: the shipped models).
    """

    measure: str = "doubt"
    budget: float = 0.02
    horizon: int = 100
    samples: int = 3
    max_samples: int | None = None
    cost_model: Any = None


_SETTINGS = AutoSettings()


def configure_auto(**changes: Any) -> AutoSettings:
    """Change the auto-planning settings (`AutoSettings` fields); returns the previous
    ones, so `configure_auto(**vars(previous))` restores them. Decisions already made
    are kept (a layer's `reset_auto_plans` forgets them).

    Raises:
        ValueError: for an unknown field or measure mode, samples < 1, or max_samples
            below samples.
    """
    global _SETTINGS
    unknown = sorted(set(changes) - set(AutoSettings.__dataclass_fields__))
    if unknown:
        raise ValueError(f"configure_auto: unknown settings {unknown}; known: "
                         f"{sorted(AutoSettings.__dataclass_fields__)}")
    if changes.get("measure", _SETTINGS.measure) not in _MEASURE_MODES:
        raise ValueError(f"configure_auto: measure must be one of {_MEASURE_MODES}, got "
                         f"{changes['measure']!r}")
    updated = replace(_SETTINGS, **changes)
    if updated.samples < 1 or (updated.max_samples is not None
                               and updated.max_samples < updated.samples):
        raise ValueError(f"configure_auto: need samples >= 1 and max_samples >= samples "
                         f"(or None), got samples={updated.samples}, "
                         f"max_samples={updated.max_samples}")
    previous, _SETTINGS = _SETTINGS, updated
    return previous


@dataclass
class AutoPlan:
    """One key's decision: how it was reached, what it cost, and (while measuring) the race.

    Attributes:
        key: (graph size buckets, dtype, width, device, training, backend).
        decision: the cost models' prediction (None when there were no models).
        reason: why it measures ("" when the prediction is trusted).
        planning_s: seconds spent predicting (features, models, decision).
        race: the measured selection (the last one), or None.
        plan: the locked-in plan (None while the race runs).
        fallback: the default, when it did not race: the race restarts with it if the
            first plan's first timed run spends `_FAULTED` of its time or more in page
            faults of its own (`_finish`).
            The models cost compute, not the allocator's page faults, and where glibc
            gives a plan's freed tensors back to the kernel every call, those faults
            can outweigh the compute: in one process state of the planner benchmark, on
            Cora (GCN 32 -> 256 inference), both (ÂX)W orders faulted 1322 times a call
            (2.6-2.8 ms) and the default, which the models rank 2x slower and which did
            not race, ran in 0.99 ms without a fault.
        earlier: races run before `race` (the first race, when the fallback races).
    """

    key: tuple
    decision: LayerDecision | None
    reason: str
    planning_s: float
    race: Race | None = None
    plan: Composition | None = None
    calls: int = field(default=0)
    fallback: Composition | None = None
    earlier: list[Race] = field(default_factory=list)

    @property
    def overhead_s(self) -> float:
        """Planning plus what the races' calls took beyond their winners'."""
        races = self.earlier + ([self.race] if self.race is not None else [])
        return self.planning_s + sum(race.overhead_s() for race in races)

    def next_call(self) -> tuple[Composition, bool]:
        self.calls += 1
        if self.plan is not None:
            return self.plan, False
        plan, timed = self.race.next_call()
        self._finish()  # a call over budget may end the race without a timing
        return plan, timed

    def record(self, plan: Composition, seconds: float, faults: int = 0) -> None:
        if self.race is not None and self.plan is None:
            self.race.record(plan, seconds, faults)
            self._finish()

    def _finish(self) -> None:
        """Lock in the race's winner once it is done; and as soon as the first plan's
        first timed run (the probe) spends `_FAULTED` of its time or more in page faults
        of its own, restart the race with the fallback (the default) in it: the models
        cost compute, and every further run of a faulting plan costs what the default
        may save (on Cora, 1.65 ms a call over the default's 0.99; finishing the first
        race before racing the default cost 24% of 100 iterations)."""
        race = self.race
        if self.fallback is not None and race.probe is not None:
            if race.own_fault_share(0) >= _FAULTED:
                self._race_fallback()
                return
            self.fallback = None  # the probe did not fault: the models' ranking holds
        if race.done:
            self.plan = race.winner

    def _race_fallback(self) -> None:
        """Race the fallback (first: its first run, then timed) and the first race's
        plans, whose decision is kept unless another is measured faster beyond the
        noise. A probe's faults can be passing (a plan faulting in one run of three):
        the others stay in."""
        first = self.race
        plans = [self.fallback, *first.plans[:_MAX_RACERS - 1]]
        predicted = None
        if self.decision is not None:
            costs = dict(self.decision.costs)
            predicted = [costs[plan] for plan in plans]
        keep = plans.index(first.plans[first.keep]) if first.keep < _MAX_RACERS - 1 else 0
        self.earlier.append(first)
        self.race = Race(plans, _SETTINGS.samples, _race_budget(), _SETTINGS.horizon,
                         predicted, _SETTINGS.max_samples, keep=keep, fault_s=first.fault_s,
                         spent_s=self.overhead_s)
        self.fallback = None
        self.reason += "; page faults in the first timed run: the default races too"

    def describe(self) -> str:
        if self.plan is None:
            runs = sum(len(t) for t in self.race.times.values())
            return f"measuring ({runs} timed runs so far; {self.reason})"
        how = (f"measured ({self.reason})" if self.race is not None
               else self.reason or "predicted")
        return (f"{self.plan}  [{how}; overhead {self.overhead_s * 1e3:.2f} ms]")


def _bucket(count: int) -> int:
    return round(4 * math.log2(count + 1))


def plan_key(graph: Any, x: Tensor, training: bool) -> tuple:
    """The decision key: graph size (quarter-octaves), dtype, width, device, mode, and the
    aggregation backend in force (`gnnforge.ops.use_backend` changes costs)."""
    from gnnforge.ops._dispatch import choose

    backend = choose("gspmm", x.device).backend
    return (_bucket(graph.num_src_nodes), _bucket(graph.num_dst_nodes),
            _bucket(graph.coo()[0].numel()), x.dtype, int(x.shape[-1]), x.device.type,
            training, backend)


def _features(structure: Structure) -> dict[str, float]:
    if "features" not in structure.memo:
        structure.memo["features"] = graph_features(structure.graph)
    return structure.memo["features"]


def _why_measure(cost_model: Any, device: torch.device) -> str:
    if _SETTINGS.measure != "doubt":
        return "measuring forced" if _SETTINGS.measure == "always" else ""
    if device.type != "cpu":
        return f"the cost models are for the CPU, this runs on {device.type}"
    wrong = mismatches(getattr(cost_model, "info", {}).get("fingerprint"),
                       current_fingerprint())
    return ("fingerprint mismatch: " + "; ".join(wrong[:3])) if wrong else ""


def _new_plan(layer: nn.Module, structure: Structure, leaves: dict[str, Tensor],
              training: bool, key: tuple) -> AutoPlan:
    from gnnforge.plan._optimize import layer_candidates

    device = leaves["X"].device
    try:
        cost_model = _SETTINGS.cost_model or _loaded_model()
    except FileNotFoundError as error:  # no models: measure every candidate
        plans = layer_candidates(layer)
        race = Race(plans[:_MAX_RACERS], _SETTINGS.samples, _race_budget(),
                    _SETTINGS.horizon, max_samples=_SETTINGS.max_samples,
                    fault_s=_at_startup(page_fault_seconds, _fault_cost_is_read()))
        return AutoPlan(key, None, f"no cost models ({error})", 0.0, race, race.winner)
    if _SETTINGS.measure == "doubt" and device.type == "cpu":  # read by _why_measure
        _at_startup(current_fingerprint, fingerprint_is_read())
    start = time.perf_counter()
    features = _features(structure)
    decision = decide_layers([(type(layer).__name__, layer)], [features], training,
                             cost_model, _rule(cost_model, None, None),
                             [isinstance(structure.graph, Graph)])[0]
    plans = [c for c, _ in decision.costs]
    costs = [s for _, s in decision.costs]
    reason = _why_measure(cost_model, device)
    if reason:
        racers = sorted(range(len(plans)), key=lambda j: (costs[j], j))
    elif _SETTINGS.measure == "never":
        racers = []
    else:
        racers = in_doubt(costs, decision.spreads, _rule(cost_model, None, None).caution)
        reason = _IN_DOUBT if len(racers) > 1 else ""
    chosen = plans.index(decision.chosen)
    if len(racers) > 1 and _SETTINGS.measure == "doubt":  # "always": every candidate
        widths = [_aggregated_width(plan, layer_symbols(layer, features)) for plan in plans]
        racers = [j for j in racers if not _aggregates_far_wider(j, racers, widths, costs)]
        racers = _one_per_work(racers, decision.calls)
        chosen = chosen if chosen in racers else min(racers, key=lambda j: (costs[j], j))
    chosen = _kept_plan(chosen, plans.index(decision.default), racers, untrusted=bool(
        reason) and reason != _IN_DOUBT)
    racers = _racing_order(chosen, racers, costs)
    elapsed = time.perf_counter() - start
    if len(racers) < 2:
        return AutoPlan(key, decision, "", elapsed, None, plans[chosen])
    race = Race([plans[j] for j in racers], _SETTINGS.samples, _race_budget(),
                _SETTINGS.horizon, [costs[j] for j in racers], _SETTINGS.max_samples,
                keep=racers.index(chosen),
                fault_s=_at_startup(page_fault_seconds, _fault_cost_is_read()),
                spent_s=elapsed)
    fallback = None if plans.index(decision.default) in racers else decision.default
    return AutoPlan(key, decision, reason, elapsed, race, fallback=fallback)


def _kept_plan(chosen: int, default: int, racers: list[int], untrusted: bool) -> int:
    """The plan a race keeps unless another is measured faster beyond the noise: the
    models' decision, or the default where the models' prediction is not trusted at all
    (a fingerprint mismatch, measuring forced, another device) and the default races.
    A race's few rounds cannot always tell near-equal plans apart, and what it cannot
    tell apart should not leave PyG's order on the word of models that do not describe
    this machine: with the numba kernels forced (models fitted on native), keeping the
    models' pick on such ties ran GCN 256 -> 256 on R-MAT 3% slower than the default
    (significantly, by the planner benchmark's runs), Â(XW) dynamic where the default's
    precomputed Â was faster (2026-11-27)."""
    return default if untrusted and default in racers else chosen


T = TypeVar("T")


def _at_startup(read: Callable[[], T], already_read: bool) -> T:
    """`read()` of a value the process reads once (cached by `read` itself); the first
    reading's seconds go to `STARTUP_S`, not to the planning time of the key that
    happened to come first."""
    start = time.perf_counter()
    value = read()
    if not already_read:
        STARTUP_S[0] += time.perf_counter() - start
    return value


def _fault_cost_is_read() -> bool:
    return page_fault_seconds.cache_info().currsize > 0


def _aggregated_width(plan: Composition, symbols: dict[str, float]) -> float:
    """The summed width (x heads) of the plan's sparse aggregations: their work per edge."""
    return sum(math.prod(bind(size, symbols) for _, size in prim.sizes)
               for prim in primitives(plan) if prim.name.startswith("spmm"))


def _aggregates_far_wider(j: int, racers: list[int], widths: list[float],
                          costs: list[float]) -> bool:
    """Whether another racer aggregates `_WIDER` times narrower than j and is predicted
    cheaper: then j does not race. An aggregation's cost grows with edges x width, and
    the orders of a layer differ in which width they aggregate (DGL's width rule); two
    signs agree, the models' prediction and the work, where the race's cost would be
    sure (a plan 1.2-2.4x slower run 2-5 times: 0.4-3% of 100 iterations; GAT and SAGE,
    32 <-> 256, in every run of the planner benchmark the narrower plan was the best).
    Candidates aggregating alike (GCN's two realisations of Â) still race."""
    return any(costs[k] < costs[j] and widths[j] >= _WIDER * widths[k] > 0
               for k in racers if k != j)


def _one_per_work(racers: list[int], calls: tuple[dict, ...]) -> list[int]:
    """The racers less those doing the same work as an earlier candidate (PyG's order
    first): the same primitive calls in another order, up to `_SAME_WORK` of the
    predicted cost (`_same_work`). What a race measures between such orders is the
    process's page-fault state, not the plan: at 256 -> 256 in eight planner-benchmark
    runs (4 graphs, inference and training; 2026-11-27), GCN's two orders with the same
    Â ran 0.75-1.59x each other, the same pair flipping between runs; SAGE's other order
    was 0.95-1.16x the default (61 of 64 at 1.01 or more), GAT's 0.98-1.12x in inference
    and 0.82-1.13x in training, again flipping; and the races on them were most of the
    configurations found significantly slower than the default (a tie that won its
    rounds) and of those whose race cost more than 2% of 100 iterations (GCN's four
    candidates). GCN's precomputed and dynamic Â differ in work and still race."""
    if not calls:
        return racers
    kept: list[int] = []
    for j in sorted(racers):  # candidate order: the default first
        if not any(_same_work(calls[j], calls[k]) for k in kept):
            kept.append(j)
    return kept


def _same_work(a: dict, b: dict) -> bool:
    """Whether two plans' calls (`_decide.Calls`, keyed by primitive call) differ by
    less than `_SAME_WORK` of the cheaper plan's predicted seconds (GAT's orders differ
    only in the weight-by-vector products of W @ a, a 256 x 256 matrix by a vector)."""
    def seconds(calls: dict) -> float:
        return sum(call[1] * call[2] for call in calls.values())

    differing = 0.0
    for key in set(a) | set(b):
        count_a = a[key][2] if key in a else 0
        count_b = b[key][2] if key in b else 0
        differing += abs(count_a - count_b) * (a.get(key) or b.get(key))[1]
    return differing <= _SAME_WORK * min(seconds(a), seconds(b))


def _racing_order(chosen: int, doubtful: list[int], costs: list[float]) -> list[int]:
    """The candidates to measure, cheapest prediction first: the models' decision (the
    default when in doubt; the race keeps it unless another is measured faster beyond
    the noise) and the others in doubt, at most `_MAX_RACERS` in all. The cheapest
    prediction runs first because the first plan runs twice before any comparison (its
    first run and the probe): a slow decision run there cost 5.5% of 100 iterations
    (a default 3.7x slower than the best), which the race's pruning cannot undo."""
    others = sorted(set(doubtful) - {chosen}, key=lambda j: (costs[j], j))
    return sorted([chosen, *others[:_MAX_RACERS - 1]], key=lambda j: (costs[j], j))


# Once per process: reading the shipped models and loading the tree walk, reading the
# fingerprint (per threads / ISA restriction / backend), timing a page fault.
STARTUP_S = [0.0]


def _loaded_model() -> Any:
    """The shipped cost model, read (and its compiled walk loaded) once per process; the
    seconds that took are in `STARTUP_S`, not in any key's planning time."""
    start = time.perf_counter()
    model = _default_model()
    if id(model) not in _MODELS_READ:  # per thread count (`shipped_models_dir`)
        model.predict("gemm", [[0.0] * 5], [1.0])  # loads numba's cached walk
        STARTUP_S[0] += time.perf_counter() - start
        _MODELS_READ.add(id(model))
    return model


_MODELS_READ: set[int] = set()


def auto_plans(layer: nn.Module) -> dict[tuple, AutoPlan]:
    """The layer's auto decisions by key (empty before its first auto call)."""
    return layer.__dict__.setdefault("_auto_plans", {})


def _fixed_plan(layer: nn.Module, expression: Node) -> Composition | None:
    plan = layer.plan
    if plan is None or plan == DEFAULT:
        return default_composition(expression)
    if isinstance(plan, Composition):
        if not is_valid_plan(expression, plan):
            raise ValueError(f"{type(layer).__name__}.plan is not a composition of this "
                             f"layer's expression {expression!r}; got {plan!r}. Use "
                             "gnnforge.plan.optimize or gnnforge.plan.layer_candidates(layer)")
        return plan
    if plan != AUTO:
        raise ValueError(f"{type(layer).__name__}.plan must be 'auto', 'default' (or None) "
                         f"or a composition from gnnforge.plan.layer_candidates; got {plan!r}")
    return None


def run_plan(layer: nn.Module, expression: Node, structure: Structure,
             leaves: dict[str, Tensor], attention_dropout: float = 0.0) -> Tensor:
    """The planner's one entry: the value of `layer`'s `expression` on `structure` with
    `leaves`, under the composition the layer's `plan` names, or, for "auto", the one
    planned (or being measured) for this call's graph, dtype, width, device and mode.

    Args:
        layer: the planned layer (its `plan`, `training` and per-key plans).
        expression: the layer's matrix expression (`gnnforge.plan._expressions`).
        structure: what the layer derived from the graph (`gnnforge.nn._graph_structure`).
        leaves: the expression's leaf tensors by name ("X" [N, I], weights, ...).
        attention_dropout: dropout on attention weights (GAT), in training only.
    """
    def run(plan: Composition, inputs: dict[str, Tensor]) -> Tensor:
        return evaluate(plan, structure, inputs, attention_dropout)

    fixed = _fixed_plan(layer, expression)
    if fixed is not None:
        return run(fixed, leaves)
    x = leaves["X"]
    training = layer.training and torch.is_grad_enabled()
    key = plan_key(structure.graph, x, training)
    plans = auto_plans(layer)
    if static_shapes(x):  # no timing inside a traced graph, nor of a lazy XLA step
        entry = plans.get(key)
        if entry is None and lazy_device(x):  # not traced: the entry may be stored
            entry = plans[key] = AutoPlan(key, None, _LAZY, 0.0, None,
                                          default_composition(expression))
        chosen = entry.plan if entry is not None and entry.plan is not None else None
        return run(chosen or default_composition(expression), leaves)
    entry = plans.get(key)
    if entry is None:
        entry = plans[key] = _new_plan(layer, structure, leaves, training, key)
    plan, timed = entry.next_call()
    if not timed:
        return run(plan, leaves)
    trials_before = ops.kernel_trials_run()

    def record(seconds: float, faults: int) -> None:
        # A call in which the kernels timed their candidates (the first calls on a graph,
        # `gnnforge.ops._trials`) measured those too: not recorded, so the race times the
        # plan again on the next call. Counted, such calls had made a SAGE race on
        # R-MAT 2^17 blocks keep the slower order (185 ms an epoch against 154).
        if ops.kernel_trials_run() == trials_before:
            entry.record(plan, seconds, faults)

    return timed_call(lambda inputs: run(plan, inputs), leaves, record, backward=training)


def auto_report(model: nn.Module) -> str:
    """One line per planned layer and key: the plan in use and how it was chosen."""
    lines = []
    for name, module in model.named_modules():
        for key, entry in module.__dict__.get("_auto_plans", {}).items():
            mode = "training" if key[6] else "inference"
            lines.append(f"{name or type(module).__name__} ({type(module).__name__}, "
                         f"{mode}, width {key[4]}, {key[7]} kernels): {entry.describe()}")
    if not lines:
        return "no layer has planned itself yet"
    if STARTUP_S[0]:
        lines.append(f"(reading the cost models, the fingerprint and a page fault's cost "
                     f"took {STARTUP_S[0] * 1e3:.0f} ms, once per process)")
    return "\n".join(lines)

