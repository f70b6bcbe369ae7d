"""Decision rules: the default is always a candidate, the margin keeps it unless a gain is
predicted beyond the models' measured error, the per-layer fixed cost, calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnforge.data import grid_2d, rmat
from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GCNConv
from gnnforge.plan import candidates, choose, default_composition, layer_candidates, optimize
from gnnforge._plan_calibration import decision_errors, layer_overheads
from gnnforge.plan._calibrate import decision_margin, decision_rule, rule_losses, time_plans
from gnnforge.plan._decide import gain_spread
from gnnforge.plan._explain import LAYER_EXPRESSIONS
from gnnforge.plan._prune import regime_of
from gnnforge.plan._suite import _ball, profile_graph_names, profile_graphs


class RateModel:
    """Seconds = work x a per-primitive rate (its optimum is computable by hand)."""

    rates = dict(gemm=1e-11, spmm_u=1e-9, spmm_w=3e-9, spmm_att=3e-9, sddmm=2e-9,
                 edge_softmax=4e-9, rowbcast=5e-10, elementwise=5e-10)

    def __init__(self, margin: float = 0.0, overhead: float = 0.0):
        self.decision_margin = margin
        self.overhead = overhead

    def predict_many(self, names, rows, works):
        return np.asarray(works) * np.asarray([self.rates[n] for n in names])

    def layer_overhead(self, layer, training):
        return self.overhead


@pytest.mark.parametrize("layer", sorted(LAYER_EXPRESSIONS))
@pytest.mark.parametrize("widths", [(32, 256), (256, 32), (64, 64), (None, None)])
def test_the_default_plan_is_never_pruned_away(layer, widths):
    expression = LAYER_EXPRESSIONS[layer]()
    plans = candidates(expression, *widths)
    assert plans[0] == default_composition(expression)
    assert len(set(plans)) == len(plans)


def test_gcn_and_gat_keep_the_default_where_pruning_says_it_cannot_win():
    # Pruning annotates projection-first as "wins only when in > out"; for 32 -> 256 the
    # regime rule alone would have dropped it, although on Cora it measured faster.
    for layer in (GCNConv(32, 256), GATConv(32, 256)):
        expression = layer.plan_expression()
        assert regime_of(32, 256) == "in<out"
        plans = layer_candidates(layer)
        assert plans[0] == default_composition(expression) and len(plans) >= 2


def test_choose_leaves_the_default_only_beyond_the_margin():
    plans = ["default", "a", "b"]
    assert choose(plans, [1.0, 0.8, 0.9]) == "a"
    assert choose(plans, [1.0, 0.8, 0.9], margin=math.log(1.3)) == "default"
    assert choose(plans, [1.0, 0.7, 0.9], margin=math.log(1.3)) == "a"
    assert choose(plans, [1.0, 1.2, 1.1], margin=0.5) == "default"
    assert choose(plans, [1.0, 1.0, 1.0]) == "default"  # a tie keeps the default
    with pytest.raises(ValueError, match="margin"):
        choose(plans, [1.0, 0.5, 0.5], margin=-0.1)
    with pytest.raises(ValueError, match="as many costs"):
        choose(plans, [1.0, 0.5])


def test_choose_subtracts_caution_times_spread():
    plans = ["default", "a", "b"]
    costs = [1.0, 0.8, 0.9]  # gains log 1.25 = 0.223 and log 1.11 = 0.105
    assert choose(plans, costs) == "a"
    # a is cheaper but uncertain: its lower bound 0.223 - 0.2 = 0.023 is below b's 0.095
    assert choose(plans, costs, spreads=[0.0, 0.2, 0.01], caution=1.0) == "b"
    assert choose(plans, costs, spreads=[0.0, 0.2, 0.01], caution=0.0) == "a"
    assert choose(plans, costs, spreads=[0.0, 0.3, 0.2], caution=1.0) == "default"
    assert choose(plans, costs, margin=0.1, spreads=[0.0, 0.2, 0.01], caution=1.0) == "default"
    assert choose(plans, costs, margin=0.09, spreads=[0.0, 0.2, 0.01], caution=1.0) == "b"
    assert choose(plans, [1.0, 0.8, 0.8], spreads=[0.0, 0.1, 0.1], caution=1.0) == "a"  # tie
    with pytest.raises(ValueError, match="caution"):
        choose(plans, costs, spreads=[0.0, 0.1, 0.1], caution=-1.0)
    with pytest.raises(ValueError, match="spreads"):
        choose(plans, costs, spreads=[0.0, 0.1])


def test_gain_spread_known_answers():
    # value: (primitive, seconds each, count, width)
    default = {"g": ("gemm", 1.0, 1, 64), "w": ("spmm_w", 1.0, 1, 64)}           # total 2
    plan = {"g": ("gemm", 1.0, 1, 64), "u": ("spmm_u", 0.5, 1, 64),
            "r": ("rowbcast", 0.25, 2, 64)}                                    # total 2
    scales = {"gemm": 0.2, "spmm_w": 0.4, "spmm_u": 0.4, "rowbcast": 0.5}
    # the shared GEMM cancels; terms: +1/2 x 0.4, -0.5/2 x 0.4, -2 x 0.25/2 x 0.5
    terms = (0.2, -0.1, -0.125)
    assert gain_spread(default, plan, scales) == pytest.approx(math.sqrt(sum(t * t for t in terms)))
    correlated = {"spmm_w": {"spmm_u": 0.6}, "spmm_u": {"spmm_w": 0.6}}
    expected = math.sqrt(sum(t * t for t in terms) + 2 * 0.6 * terms[0] * terms[1])
    assert gain_spread(default, plan, scales, correlated) == pytest.approx(expected)
    assert gain_spread(default, default, scales, correlated) == 0.0
    # the correlation applies at equal widths only; one primitive at two widths uses its
    # own cross-width correlation
    wide = {"g": ("gemm", 1.0, 1, 64), "u": ("spmm_u", 0.5, 1, 32),
            "r": ("rowbcast", 0.25, 2, 64)}
    assert gain_spread(default, wide, scales, correlated) == pytest.approx(
        gain_spread(default, plan, scales))
    one = {"u": ("spmm_u", 1.0, 1, 256)}
    other = {"v": ("spmm_u", 1.0, 1, 32)}
    assert gain_spread(one, other, scales) == pytest.approx(0.4 * math.sqrt(2))
    assert gain_spread(one, other, scales, {"spmm_u": {"spmm_u": 0.5}}) == pytest.approx(0.4)


def _spread_record(config, predicted, spread, measured, plan="p"):
    return dict(graph=config, layer="GCNConv", widths=[8, 8], training=False, plan=plan,
                default="d", predicted_gain=predicted, spread=spread, measured_gain=measured)


def test_decision_rule_is_a_quantile_of_standardised_errors():
    # standardised over-predictions (predicted - measured) / spread: 0, 1, ..., 9
    records = [_spread_record(f"c{i}", 0.1 * i, 0.1, 0.0) for i in range(10)]
    records.append(_spread_record("tie", 0.0, 0.0, -0.5))  # no spread: not counted
    margin, caution = decision_rule(records)
    assert margin == 0.0 and caution == pytest.approx(8.1)  # numpy's linear 90% quantile

    assert decision_rule(records, quantile=0.5) == (0.0, pytest.approx(4.5))
    assert decision_rule([_spread_record("a", 0.1, 0.1, 0.5)])[1] == 0.0  # under-predicted
    with pytest.raises(ValueError, match="no calibration records"):
        decision_rule([])
    with pytest.raises(ValueError, match="spread"):
        decision_rule([_record("a", 0.1, 0.1)])
    with pytest.raises(ValueError, match="quantile"):
        decision_rule(records, quantile=1.5)


def test_rule_losses_replays_choose_on_the_calibration():
    records = [_spread_record("a", 0.5, 0.1, -0.3, "x"),   # lower bound 0.5 - k 0.1
               _spread_record("a", 0.2, 0.01, 0.1, "y"),   # lower bound 0.2 - k 0.01
               _spread_record("b", 0.05, 0.01, -0.2, "x")]
    lost = rule_losses(records, margin=0.0, caution=0.0)
    assert [(r["plan"], r["measured_gain"]) for r in lost] == [("x", -0.3), ("x", -0.2)]
    assert [r["plan"] for r in rule_losses(records, 0.0, 4.0)] == ["x"]  # y wins in a
    assert rule_losses(records, 0.0, 6.0) == []


def test_optimize_applies_the_cost_models_margin():
    graph = rmat(8, 2000, seed=3)
    free = optimize(GCNConv(16, 256), graph, training=False, cost_model=RateModel())
    decision = free.decisions[0]
    costs = dict(decision.costs)
    gain = math.log(costs[decision.default] / costs[decision.chosen])
    assert decision.chosen != decision.default and gain > 0
    below = optimize(GCNConv(16, 256), graph, training=False,
                     cost_model=RateModel(margin=gain * 1.01))
    assert below.decisions[0].chosen == below.decisions[0].default
    assert below.margin == pytest.approx(gain * 1.01) and "predicted gain above" in str(below)
    above = optimize(GCNConv(16, 256), graph, training=False,
                     cost_model=RateModel(margin=gain * 0.99))
    assert above.decisions[0].chosen == decision.chosen
    forced = optimize(GCNConv(16, 256), graph, training=False,
                      cost_model=RateModel(margin=gain * 1.01), margin=0.0)
    assert forced.decisions[0].chosen == decision.chosen


def test_layer_overhead_is_added_to_every_candidate():
    graph = grid_2d(6, 6)
    plain = dict(optimize(GCNConv(8, 8), graph, cost_model=RateModel()).decisions[0].costs)
    fixed = dict(optimize(GCNConv(8, 8), graph,
                          cost_model=RateModel(overhead=1e-3)).decisions[0].costs)
    assert plain.keys() == fixed.keys()
    for plan, cost in plain.items():
        assert fixed[plan] == pytest.approx(cost + 1e-3)


def test_shipped_cost_model_exposes_margin_and_overheads():
    from gnnforge.plan import CostModel

    model = CostModel.load()
    assert model.decision_margin >= 0
    assert model.layer_overhead("NoSuchLayer", True) == 0.0
    empty = CostModel(model.models, {})
    assert empty.decision_margin == 0.0 and empty.layer_overhead("GCNConv", False) == 0.0


def test_time_plans_interleaves_and_restores_the_plan():
    graph = grid_2d(5, 5)
    layer = GCNConv(4, 8)
    plans = layer_candidates(layer)
    x = torch.randn(graph.num_nodes, 4, requires_grad=True)
    first, times = time_plans(layer, graph, x, True, plans, samples=3)
    assert set(first) == set(times) == set(plans)
    assert all(len(t) == 3 and min(t) > 0 for t in times.values())
    assert layer.plan == "auto" and x.grad is None  # restored
    with pytest.raises(ValueError, match="samples"):
        time_plans(layer, graph, x, False, plans, samples=0)
    _, more = time_plans(layer, graph, x, False, plans, samples=2, min_seconds=60.0,
                         max_samples=7)
    assert all(len(t) == 7 for t in more.values())  # capped: a tiny layer never reaches 60 s


class _PlanLog(torch.nn.Module):
    """Stands in for a layer: records the plan of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.plan, self.log = "auto", []

    def forward(self, graph, x):
        self.log.append(self.plan)
        return x


def test_time_plans_settles_each_plan_before_timing_it():
    # a plan run for many iterations follows itself: with settle=1 each timed run follows
    # an untimed run of the same plan, never another plan's (whose frees it would pay for)
    layer, plans = _PlanLog(), ["p", "q", "r"]
    _, times = time_plans(layer, None, torch.zeros(1), False, plans, samples=2, settle=1)
    rounds = layer.log[len(plans):]  # after the first runs
    assert len(rounds) == 2 * len(plans) * 2 and all(len(t) == 2 for t in times.values())
    assert all(rounds[k] == rounds[k + 1] for k in range(0, len(rounds), 2))
    with pytest.raises(ValueError, match="settle=-1"):
        time_plans(layer, None, torch.zeros(1), False, plans, samples=2, settle=-1)


def test_decision_errors_and_margin_on_tiny_graphs():
    graphs = [("grid", grid_2d(6, 6)), ("rmat", rmat(6, 200, seed=2))]
    records = decision_errors(RateModel(), graphs, widths=((8, 32), (32, 32)), samples=2,
                              progress=False, min_seconds=0.0)
    # per graph x width x mode: GCN 8->32 has 2 non-default candidates, 32->32 has 3;
    # GAT has 1 alternative in both regimes; SAGE none at 8->32 (project-first can only
    # win when the output is narrower), 1 at 32->32
    assert len(records) == 2 * 2 * ((2 + 1) + (3 + 1 + 1))
    assert all(math.isfinite(r["predicted_gain"]) and math.isfinite(r["measured_gain"])
               for r in records)
    assert all(r["timing_noise"] >= 0 and r["spread"] == 0.0 for r in records)
    assert decision_margin(records) >= 0
    with pytest.raises(ValueError, match="no calibration records"):
        decision_margin([])


def _record(config, predicted, measured):
    return dict(graph=config, layer="GCNConv", widths=[8, 8], training=False,
                predicted_gain=predicted, measured_gain=measured)


def test_decision_margin_is_the_largest_predicted_gain_that_lost():
    records = [
        _record("a", 0.9, 0.5), _record("a", 0.3, -0.4),   # a's pick (0.9) won: no constraint
        _record("b", 0.4, -0.2), _record("b", 0.1, 0.2),   # b's pick lost 18%: margin >= 0.4
        _record("c", 0.2, math.log(0.97)),                 # lost 3%, within the 5% tolerance
        _record("d", -0.1, -0.5),                          # never leaves the default
    ]
    assert decision_margin(records) == pytest.approx(0.4)
    assert decision_margin(records, tolerance=0.01) == pytest.approx(0.4)
    assert decision_margin(records[:2] + records[4:]) == 0.0
    # with the margin, no configuration's pick loses more than the tolerance
    margin = decision_margin(records)
    for config in "abcd":
        pick = max((r for r in records if r["graph"] == config),
                   key=lambda r: r["predicted_gain"])
        gain = pick["measured_gain"] if pick["predicted_gain"] > margin else 0.0
        assert gain >= math.log(0.95)


def test_layer_overheads_cover_every_planned_layer_and_mode():
    overheads = layer_overheads(samples=1)
    assert set(overheads) == {"GCNConv", "GATConv", "GATv2Conv", "SGConv", "TAGConv", "SAGEConv",
                              "GINConv", "RGCNConv"}
    assert all(set(m) == {"infer", "train"} and min(m.values()) > 0 for m in overheads.values())


def test_profile_graphs_by_name():
    assert list(profile_graph_names())[:2] == ["rmat-s11", "rmat-s13"]
    (name, family, graph), = profile_graphs(names=["grid-60"])
    assert (name, family, graph.num_nodes) == ("grid-60", "road", 3600)
    with pytest.raises(ValueError, match="unknown names"):
        list(profile_graphs(names=["nope"]))


def test_ball_is_a_connected_region_of_the_requested_size():
    import scipy.sparse.csgraph

    graph = grid_2d(30, 30, shuffle=True, seed=0)
    region = _ball(graph, 100, seed=1)
    assert region.num_nodes == 100
    adjacency = torch.zeros(100, 100)
    adjacency[region.src, region.dst] = 1
    count, _ = scipy.sparse.csgraph.connected_components(adjacency.numpy(), directed=False)
    assert count == 1
    assert _ball(graph, 10_000, seed=1) is graph
    # a graph of two components: the region restarts in the other one
    two = Graph(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 0, 3, 2]), 4)
    assert _ball(two, 3, seed=0).num_nodes == 3


def test_profile_cli_chunks_then_fits_from_several_record_files(tmp_path, capsys):
    pytest.importorskip("xgboost")
    import json

    from gnnforge.cli import main
    from gnnforge.plan import CostModel
    from gnnforge.plan._profile import ProfileConfig, collect

    config = ProfileConfig(widths=(8, 16), heads=(1, 2), repeats=1)
    chunks = [collect([("grid", "road", grid_2d(6, 6))], config, progress=False),
              collect([("rmat", "power-law", rmat(6, 300, seed=1))], config, progress=False)]
    paths = []
    for i, records in enumerate(chunks):
        paths.append(tmp_path / f"chunk{i}.json")
        paths[-1].write_text(json.dumps(records))
    out = tmp_path / "models"
    assert main(["plan", "profile", "--from-records", *map(str, paths),
                 "--calibration-samples", "0", "--out", str(out)]) == 0
    assert "decision rule: not measured (margin 0, caution 0)" in capsys.readouterr().out
    model = CostModel.load(out)
    assert model.info["records"] == sum(map(len, chunks))
    assert model.info["graphs"] == ["grid", "rmat"] and model.decision_margin == 0.0
    assert model.layer_overhead("GCNConv", True) > 0


def test_profile_cli_rejects_unknown_graph_names(capsys):
    from gnnforge.cli import main

    with pytest.raises(SystemExit):
        main(["plan", "profile", "--no-fit", "--graphs", "no-such-graph"])
    assert "unknown --graphs ['no-such-graph']" in capsys.readouterr().err


class UncertainRateModel(RateModel):
    """RateModel with held-out error scales and a caution, as profiled models have."""

    def __init__(self, caution: float):
        super().__init__()
        self.decision_caution = caution

    def error_scales(self):
        return {name: 0.3 for name in self.rates}

    def error_correlations(self):
        return {}


def test_optimize_applies_the_cost_models_caution():
    graph = rmat(8, 2000, seed=3)
    free = optimize(GCNConv(16, 256), graph, training=False, cost_model=UncertainRateModel(0.0))
    decision = free.decisions[0]
    assert decision.chosen != decision.default
    assert len(decision.spreads) == len(decision.costs) and decision.spreads[0] == 0.0
    costs = dict(decision.costs)
    spreads = dict(zip(costs, decision.spreads))
    gain = math.log(costs[decision.default] / costs[decision.chosen])
    assert 0 < spreads[decision.chosen] < gain
    # a caution that puts every lower bound below 0 keeps the default
    caution = max(math.log(costs[decision.default] / c) / s
                  for plan, c in costs.items() if (s := spreads[plan]) > 0) * 1.01
    kept = optimize(GCNConv(16, 256), graph, training=False,
                    cost_model=UncertainRateModel(caution))
    assert kept.decisions[0].chosen == kept.decisions[0].default
    assert f"{caution:.2f} x its spread" in str(kept) and "+-" in str(kept)
    forced = optimize(GCNConv(16, 256), graph, training=False,
                      cost_model=UncertainRateModel(caution), caution=0.0)
    assert forced.decisions[0].chosen == decision.chosen


@pytest.mark.parametrize("training", [False, True])
def test_shipped_models_choices_compute_the_default_results(training):
    from gnnforge.plan._suite import _mycielski

    graph = _mycielski(8)  # dense: the layers here predict gains off the default plan
    torch.manual_seed(0)
    moved = 0
    for layer in (GCNConv(32, 256), GCNConv(256, 32), GATConv(32, 256)):
        layer.train(training)
        x = torch.randn(graph.num_nodes, layer.plan_symbols()["I"], requires_grad=True)
        default_out = layer(graph, x)
        default_out.square().sum().backward()
        default_grads = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
        x.grad = None
        layer.zero_grad()
        plan = optimize(layer, graph, training=training, margin=0.0, caution=0.0)
        assert layer.plan == plan.decisions[0].chosen
        moved += plan.decisions[0].chosen != plan.decisions[0].default
        out = layer(graph, x)
        out.square().sum().backward()
        grads = [x.grad] + [p.grad for p in layer.parameters()]
        torch.testing.assert_close(out, default_out, rtol=1e-4, atol=1e-4)
        for got, expected in zip(grads, default_grads):
            torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)
    assert moved >= 1  # which layers move depends on the models shipped; some must


def test_timing_noise_is_the_odd_even_difference_of_the_gain():
    from gnnforge.plan._calibrate import half_difference as _half_difference

    default = [2.0, 4.0, 2.0, 4.0]   # odd rounds 2.0, even rounds 4.0
    plan = [1.0, 1.0, 1.0, 1.0]
    assert _half_difference(default, plan) == pytest.approx(math.log(4.0) - math.log(2.0))
    assert _half_difference(plan, plan) == 0.0
    assert _half_difference([1.0], [2.0]) == 0.0


def test_profile_records_name_the_kernel_variants_chosen_while_timing(monkeypatch):
    """The kernel calibration chooses a class's variant on its first call: the records'
    fingerprint is read after the timings, so the models record what their timings ran."""
    from gnnforge.plan import _fingerprint, _profile

    chosen: dict[str, str] = {"cpu_model": "test"}

    def time_call(run, repeats):
        chosen["kernel:copy_lhs.sum.float32.int32.w32B"] = "native:avx512"
        return 1e-3

    monkeypatch.setattr(_fingerprint, "fingerprint", lambda: dict(chosen))
    monkeypatch.setattr(_profile, "time_call", time_call)
    config = _profile.ProfileConfig(widths=(8,), heads=(1,), repeats=1)
    records = _profile.collect([("grid", "road", grid_2d(4, 4))], config, progress=False)
    assert records and all(r["fingerprint"] == chosen for r in records)


def test_limit_threads_holds_after_the_numba_pool_started(tmp_path):
    """Starting numba's OpenMP pool (a fingerprint() reads the kernel selection) resets
    the process's OpenMP thread count: limit_threads(1) then left torch on 2 threads, and
    `gnnforge doctor`-style checks reported "threads: 1 -> 2". A fresh process, since the
    pool starts once per process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests._timeouts import SUBPROCESS_TIMEOUT_S

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores to tell 1 thread from all")
    script = ("import torch\n"
              "from gnnforge.plan._fingerprint import fingerprint\n"
              "from gnnforge.plan._profile import limit_threads\n"
              "fingerprint()\n"
              "limit_threads(1)\n"
              "print(torch.get_num_threads(), fingerprint()['threads'])\n")
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=repo, timeout=SUBPROCESS_TIMEOUT_S, check=True)
    assert out.stdout.split() == ["1", "1"]
