"""Planning on by default: "auto" layers plan per key, measure when in doubt, and always
compute the default plan's values; the shared per-graph cache; fingerprints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gnnforge import ops
from gnnforge.data import rmat
from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GCNConv, NodeClassifier
from gnnforge.plan import (auto_plans, auto_report, clear_cache, configure_auto, fingerprint,
                           layer_candidates, model_status, models_match, optimize)
from gnnforge.plan import _auto
from gnnforge.plan._fingerprint import mismatches
from gnnforge.plan._graph_cache import GRAPH_CACHE
from gnnforge.plan._trial import timed_call
from gnnforge.sampling import NeighborSampler

from .test_optimize import AnalyticModel


@pytest.fixture
def settings():
    """Restore the auto-planning settings after the test."""
    previous = configure_auto()
    yield configure_auto
    configure_auto(**vars(previous))


class Matching(AnalyticModel):
    """An analytic cost model whose fingerprint is this process's (a trusted model)."""

    decision_caution = 0.0
    decision_margin = 0.0

    def __init__(self):
        self.info = {"fingerprint": fingerprint()}


def _steps(layer, graph, x, steps):
    outs, grads = [], []
    for _ in range(steps):
        x_ = x.clone().requires_grad_(True)
        out = layer(graph, x_)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        outs.append(out.detach())
        grads.append([x_.grad] + [p.grad.clone() for p in layer.parameters()])
        layer.zero_grad()
    return outs, grads


@pytest.mark.parametrize("make", [lambda: GCNConv(12, 5), lambda: GATConv(12, 16, heads=2)])
@pytest.mark.parametrize("graph", [rmat(6, 300, seed=2),
                                   Graph(torch.zeros(0, dtype=torch.long),
                                         torch.zeros(0, dtype=torch.long), 7)],
                         ids=["rmat", "no-edges"])
def test_measuring_runs_every_candidate_and_keeps_the_default_values(settings, make, graph):
    settings(measure="always", samples=2, max_samples=2, budget=10.0)  # <= 12 calls
    torch.manual_seed(0)
    layer = make().double()
    reference = make().double()
    reference.load_state_dict(layer.state_dict())
    reference.plan = "default"
    x = torch.randn(graph.num_nodes, 12, dtype=torch.float64)
    outs, grads = _steps(layer, graph, x, 12)
    want_outs, want_grads = _steps(reference, graph, x, 1)
    for out, grad in zip(outs, grads):
        torch.testing.assert_close(out, want_outs[0], rtol=1e-9, atol=1e-10)
        for got, want in zip(grad, want_grads[0]):
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    (entry,) = auto_plans(layer).values()
    assert entry.race is not None and entry.plan in layer_candidates(layer)
    assert entry.race.done and all(entry.race.times[i] for i in entry.race.alive)
    assert "measured (measuring forced" in auto_report(layer)


def test_a_trusted_prediction_locks_in_at_once_and_keys_separate(settings):
    settings(measure="doubt", cost_model=Matching())
    graph = rmat(7, 900, seed=1)
    layer = GCNConv(64, 8)
    layer(graph, torch.randn(graph.num_nodes, 64))
    with torch.no_grad():
        layer(graph, torch.randn(graph.num_nodes, 64))
    layer.eval()
    layer(graph, torch.randn(graph.num_nodes, 64).double().float())
    entries = auto_plans(layer)
    assert len(entries) == 2  # training and inference; the eval call reuses inference's
    for entry in entries.values():
        assert entry.race is None and entry.plan == entry.decision.chosen
    predicted = optimize(GCNConv(64, 8), graph, training=True, cost_model=Matching(),
                         apply=False).decisions[0].chosen
    training_entry = next(e for k, e in entries.items() if k[6])
    assert training_entry.plan == predicted


def test_never_measure_and_fixed_plans(settings):
    settings(measure="never", cost_model=AnalyticModel())  # no fingerprint: but never
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 4)
    layer(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(layer).values()
    assert entry.race is None
    fixed = GCNConv(8, 4)
    fixed.plan = "default"
    fixed(graph, torch.randn(graph.num_nodes, 8))
    assert auto_plans(fixed) == {}
    fixed.plan = "fastest"
    with pytest.raises(ValueError, match="'auto', 'default'"):
        fixed(graph, torch.randn(graph.num_nodes, 8))


def test_a_fingerprint_mismatch_measures(settings):
    settings(measure="doubt", cost_model=AnalyticModel())  # fitted "elsewhere"
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 4)
    layer(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(layer).values()
    assert entry.race is not None and "fingerprint mismatch" in entry.reason
    assert entry.race.spent_s == entry.planning_s > 0  # planning counts for the budget


def test_on_a_fingerprint_mismatch_a_tie_keeps_the_default(settings):
    """Models fitted elsewhere are not trusted: their pick does not win a measured tie
    (numba forced, GCN 256 -> 256 on R-MAT: their pick, kept on a tie, ran 3% slower
    than the default). The analytic model prefers a dynamic Â here."""
    settings(measure="doubt", cost_model=AnalyticModel())  # fitted "elsewhere"
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(16, 16)
    layer(graph, torch.randn(graph.num_nodes, 16))
    (entry,) = auto_plans(layer).values()
    assert entry.decision.chosen != entry.decision.default  # the models' pick
    race = entry.race
    assert race.plans[race.keep] == entry.decision.default
    # trusted models in doubt keep their own pick (the lower-bound rule chose it)
    from gnnforge.plan._auto import _kept_plan

    assert _kept_plan(2, 0, [0, 1, 2], untrusted=False) == 2
    assert _kept_plan(2, 0, [1, 2], untrusted=True) == 2  # the default did not race


def test_a_race_plans_within_a_share_of_the_budget(settings):
    # The race prices calls by its own few runs; an independent measurement prices them
    # up to 1.6x higher on near-ties, so it aims under the budget the user set.
    from gnnforge.plan import _auto

    settings(measure="always", budget=0.02)
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 4)
    layer(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(layer).values()
    assert entry.race.budget == pytest.approx(0.02 * _auto._BUDGET_AIM)
    assert 0.5 <= _auto._BUDGET_AIM < 1.0


def test_reading_the_fingerprint_is_startup_not_the_first_keys_planning(settings, monkeypatch):
    """The fingerprint is read once per process (~1 ms here: 2% of 100 iterations of a
    0.6 ms layer); the key that comes first must not be charged for it."""
    import time

    from gnnforge.plan import _auto, _fingerprint

    settings(measure="doubt", cost_model=Matching())
    real = _fingerprint.fingerprint

    def slow_fingerprint():
        time.sleep(0.05)
        return real()

    monkeypatch.setattr(_fingerprint, "fingerprint", slow_fingerprint)
    monkeypatch.setattr(_fingerprint, "_CURRENT", {})
    monkeypatch.setattr(_auto, "STARTUP_S", [0.0])
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 4)
    with torch.no_grad():
        layer(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(layer).values()
    assert entry.planning_s < 0.05 <= _auto.STARTUP_S[0]


def test_a_candidate_aggregating_far_wider_and_predicted_slower_does_not_race(settings):
    from gnnforge.plan._auto import _aggregated_width, _aggregates_far_wider

    settings(measure="doubt", cost_model=AnalyticModel())  # a mismatch: all in doubt
    graph = rmat(6, 300, seed=3)
    gat = GATConv(8, 64)  # α(XW) aggregates at 64, (αX)W at 8: only the latter runs
    gat(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(gat).values()
    assert entry.race is None and "@ X) @ W)" in str(entry.plan)
    gcn = GCNConv(8, 64)  # both realisations of Â aggregate at 8: those two race
    gcn(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(gcn).values()
    assert len(entry.race.plans) == 2
    assert {p.norm for p in entry.race.plans} == {"precompute", "dynamic"}
    symbols = {"I": 8, "O": 64, "H": 1, "D": 64, "Nd": 10, "Ns": 10, "E": 30}
    # the regime's two orders (aggregating at 8) and the default (at 64)
    assert sorted(_aggregated_width(p, symbols) for p in layer_candidates(gcn)) == \
        [8, 8, 64]
    # only with both signs: 4x the width and a higher predicted cost
    assert _aggregates_far_wider(0, [0, 1], [64.0, 8.0], [2.0, 1.0])
    assert not _aggregates_far_wider(0, [0, 1], [64.0, 8.0], [1.0, 2.0])
    assert not _aggregates_far_wider(0, [0, 1], [24.0, 8.0], [2.0, 1.0])
    assert not _aggregates_far_wider(0, [0, 1], [64.0, 0.0], [2.0, 1.0])  # no edges


def test_orders_doing_the_same_work_do_not_race_each_other(settings):
    """What a race measures between the same calls in another order is the page-fault
    state: only the earlier candidate (PyG's order first) races for them."""
    from gnnforge.nn import SAGEConv
    from gnnforge.plan._auto import _same_work

    settings(measure="doubt", cost_model=AnalyticModel())  # a mismatch: all in doubt
    graph = rmat(6, 300, seed=3)
    gcn = GCNConv(16, 16)  # two orders x two realisations of Â: one order per Â races
    gcn(graph, torch.randn(graph.num_nodes, 16))
    (entry,) = auto_plans(gcn).values()
    assert len(entry.race.plans) == 2
    assert {p.norm for p in entry.race.plans} == {"precompute", "dynamic"}
    assert all(p.tree == entry.decision.default.tree for p in entry.race.plans)
    for layer in (SAGEConv(16, 16), GATConv(16, 16)):  # the same work in both orders
        layer(graph, torch.randn(graph.num_nodes, 16))
        (entry,) = auto_plans(layer).values()
        assert entry.race is None and entry.plan == entry.decision.default
    # calls: key -> (primitive, seconds, count, width); 1% of the cheaper plan at most
    a = {"gemm": ("gemm", 1.0, 1, 16), "spmm": ("spmm_u", 1.0, 1, 16)}
    assert _same_work(a, {**a, "gemv": ("gemm", 0.01, 2, 1)})
    assert not _same_work(a, {**a, "gemv": ("gemm", 0.03, 1, 1)})
    assert not _same_work(a, {"gemm": a["gemm"], "spmm": ("spmm_u", 1.0, 2, 16)})


def test_an_eval_layer_called_with_autograd_on_still_locks_in_a_plan(settings):
    """Inference written without torch.no_grad(): nobody differentiates the output, so
    the race times forwards (waiting for a backward, it never ended)."""
    settings(measure="always", samples=2, max_samples=2, budget=10.0)  # <= 12 calls
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 32).eval()
    x = torch.randn(graph.num_nodes, 8)
    for _ in range(12):
        layer(graph, x)
    (entry,) = auto_plans(layer).values()
    assert entry.plan is not None and entry.race.done


def test_timed_call_times_forward_and_backward_without_changing_gradients():
    torch.manual_seed(0)
    weight = torch.randn(5, 3, requires_grad=True)
    x = torch.randn(4, 5)  # no gradient: must not get one
    seen = []
    out = timed_call(lambda t: torch.tanh(t["X"] @ t["W"]), {"X": x, "W": weight},
                     lambda *timing: seen.append(timing))
    assert seen == []  # the backward has not run yet
    out.sum().backward()
    assert len(seen) == 1 and seen[0][0] > 0 and seen[0][1] >= 0
    want = torch.autograd.grad(torch.tanh(x @ weight).sum(), weight)[0]
    torch.testing.assert_close(weight.grad, want)
    with torch.no_grad():
        timed_call(lambda t: t["X"] @ t["W"], {"X": x, "W": weight},
                   lambda *timing: seen.append(timing))
    assert len(seen) == 2


def test_timed_call_counts_the_page_faults_of_the_call():
    """A call that touches fresh pages reports at least as many faults (what the race
    discounts); the count spans the forward and the backward."""
    import mmap

    pages = 64

    def touching(tensors):
        with mmap.mmap(-1, pages * mmap.PAGESIZE) as fresh:
            for offset in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
                fresh[offset] = 1
        return tensors["W"] * 2.0

    seen = []
    weight = torch.randn(3, requires_grad=True)
    timed_call(touching, {"W": weight}, lambda *timing: seen.append(timing)).sum().backward()
    with torch.no_grad():
        timed_call(touching, {"W": weight}, lambda *timing: seen.append(timing))
    assert [faults >= pages for _, faults in seen] == [True, True]


def test_layers_share_one_prepared_graph_and_its_edge_normalisation():
    clear_cache()
    graph = rmat(6, 300, seed=4)
    first, second = GCNConv(8, 8), GCNConv(8, 8)
    first.plan = second.plan = layer_candidates(first)[0]  # the precomputed Â
    x = torch.randn(graph.num_nodes, 8)
    second(graph, first(graph, x))
    assert len(GRAPH_CACHE) == 0  # a Graph keeps its prepared structure itself
    (structure,) = [value for key, value in graph._cache.items() if key[0] == "prepared"]
    norm = structure.memo["edge_norm"]
    first(graph, x)  # another epoch: the same tensor, not recomputed
    assert structure.memo["edge_norm"] is norm


def test_a_graph_and_its_prepared_structures_are_freed_together():
    import gc
    import weakref

    graph = rmat(6, 300, seed=4)
    conv = GCNConv(8, 8)
    conv(graph, torch.randn(graph.num_nodes, 8))
    structure = weakref.ref([value for key, value in graph._cache.items()
                             if key[0] == "prepared"][0])
    del graph
    gc.collect()
    assert structure() is None  # nothing global kept it (nor the graph it was built from)


def test_other_graph_objects_use_the_lru():
    class Duck:  # the kernel protocol without a cache dict of its own
        pass

    clear_cache()
    duck = Duck()
    assert GRAPH_CACHE.get(duck, "k", lambda: 1) == 1 and len(GRAPH_CACHE) == 1
    assert GRAPH_CACHE.get(duck, "k", lambda: 2) == 1
    clear_cache()
    assert len(GRAPH_CACHE) == 0


def test_optimize_takes_one_block_per_layer():
    graph = rmat(8, 3000, seed=5)
    blocks = NeighborSampler([4, 4]).sample(graph, torch.arange(10),
                                            generator=torch.Generator().manual_seed(0))
    model = NodeClassifier(16, 32, 3, num_layers=2, conv="gcn")
    plan = optimize(model, blocks, training=True, cost_model=AnalyticModel())
    assert len(plan.decisions) == 2
    assert [int(d.widths[0]) for d in plan.decisions] == [16, 32]
    with pytest.raises(ValueError, match="got 1 graphs or blocks for 2 planned layers"):
        optimize(model, blocks[:1], cost_model=AnalyticModel())
    x = torch.randn(blocks[0].num_src_nodes, 16)
    assert model(blocks, x).shape == (10, 3)


def test_the_race_runs_the_cheapest_predictions_first_and_always_the_decision():
    from gnnforge.plan._auto import _MAX_RACERS, _racing_order

    assert _racing_order(0, [0, 1, 2], [3.0, 1.0, 2.0]) == [1, 2, 0]
    assert _racing_order(2, [0, 1], [1.0, 5.0, 2.0]) == [0, 2, 1]
    # the decision races even when the others in doubt fill the places: the cheapest
    # of them, then the decision at its own place by cost
    many = list(range(_MAX_RACERS + 2))
    costs = [float(j) for j in many]
    assert _racing_order(many[-1], many, costs) == [*many[:_MAX_RACERS - 1], many[-1]]


def test_the_current_fingerprint_follows_the_backend_in_force():
    from gnnforge import ops
    from gnnforge.plan._fingerprint import current_fingerprint

    here = current_fingerprint()
    assert not mismatches(here, fingerprint())  # kernel classes measured since: not compared
    with ops.use_backend("numba"):
        assert current_fingerprint()["backend"] == "numba" != here["backend"]
    assert current_fingerprint() == here


def test_fingerprint_comparison_and_model_status():
    here = fingerprint()
    assert mismatches(here, here) == []
    assert mismatches(None, here)[0].startswith("no fingerprint")
    other = dict(here, backend="numba")
    assert mismatches(other, here) == [f"backend: numba -> {here['backend']}"]
    assert model_status(Matching()).startswith("match")
    assert models_match(Matching())
    status = model_status(type("M", (), {"info": {"fingerprint": other}})())
    assert status.startswith("mismatch") and "plan profile --quick" in status


def test_a_model_with_no_planned_layers_reports_so():
    assert auto_report(nn.Linear(2, 2)) == "no layer has planned itself yet"


def _drive(entry, seconds: dict, faults: dict, limit: int = 100) -> list[str]:
    """Drive an AutoPlan with fixed per-plan seconds and page faults; returns the plans
    of its calls."""
    order = []
    for _ in range(limit):
        if entry.plan is not None:
            break
        plan, timed = entry.next_call()
        order.append(plan)
        if timed:
            entry.record(plan, seconds[plan], faults[plan])
    return order


def test_a_first_plan_spending_its_run_in_page_faults_races_the_default(settings):
    """Cora, GCN 32 -> 256 inference, in one state of the planner benchmark's process:
    both (ÂX)W orders faulted 1322 times a call after themselves, 2.6-2.8 ms, and the
    default, which the models rank 2x slower and which did not race, ran in 0.99 ms
    without a fault. When the first plan's first timed run spends a quarter of its time
    or more in faults of its own, the race restarts with the default in it (first);
    without faults the default never runs."""
    from gnnforge.plan._auto import AutoPlan
    from gnnforge.plan._race import Race

    settings(samples=3, budget=0.02)
    seconds = {"dyn": 2.64e-3, "pre": 2.72e-3, "default": 0.99e-3}
    faults = {"dyn": 1322, "pre": 1322, "default": 0}

    def entry():
        return AutoPlan("key", None, "in doubt", 0.0,
                        Race(["dyn", "pre"], budget=0.02, fault_s=1.5e-6, keep=1),
                        fallback="default")

    faulting = entry()
    order = _drive(faulting, seconds, faults)
    assert faulting.plan == "default"
    assert order[:4] == ["dyn", "dyn", "default", "default"]
    assert len(faulting.earlier) == 1 and faulting.earlier[0].plans == ["dyn", "pre"]
    assert faulting.race.plans == ["default", "dyn", "pre"]
    assert faulting.race.plans[faulting.race.keep] == "pre"  # the first race's decision
    assert "the default races too" in faulting.reason
    # a passing fault in the probe: the faster of the first race's plans still wins
    passing = entry()
    _drive(passing, {"dyn": 0.8e-3, "pre": 0.67e-3, "default": 0.95e-3},
           {"dyn": 300, "pre": 0, "default": 0})
    assert passing.plan == "pre" and passing.earlier
    quiet = entry()
    order = _drive(quiet, seconds, {"dyn": 0, "pre": 0, "default": 0})
    assert quiet.plan == "dyn" and "default" not in order and not quiet.earlier


def test_a_timed_call_that_ran_kernel_trials_is_timed_again(settings, monkeypatch):
    # Every other timed call also times kernel candidates (a new graph's first calls):
    # those are not recorded, and the race times the same plan on the next call.
    settings(measure="always", samples=2, max_samples=2, budget=10.0)
    trials, timed_calls = [0], [0]
    monkeypatch.setattr(ops, "kernel_trials_run", lambda: trials[0])
    real_timed_call = _auto.timed_call

    def timed_with_a_trial(call, leaves, record, backward=False):
        timed_calls[0] += 1
        trials[0] += timed_calls[0] % 2           # odd timed calls run a kernel trial
        return real_timed_call(call, leaves, record, backward)

    monkeypatch.setattr(_auto, "timed_call", timed_with_a_trial)
    layer = GCNConv(12, 5).double()
    graph = rmat(6, 300, seed=2)
    _steps(layer, graph, torch.randn(graph.num_nodes, 12, dtype=torch.float64), 40)
    (entry,) = auto_plans(layer).values()
    assert entry.race.done and timed_calls[0] >= 4
    assert sum(len(times) for times in entry.race.times.values()) == timed_calls[0] // 2
