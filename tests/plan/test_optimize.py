"""optimize = enumerate + cost + choose, applied to a model's layers; the profiler and
cost-model round trip on tiny graphs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gnnforge.data import grid_2d, rmat
from gnnforge.nn import GATConv, GCNConv, TAGConv
from gnnforge.plan import CostModel, cost_plans, layer_candidates, optimize, primitives
from gnnforge.plan._cost import MODELS_DIR
from gnnforge.plan._primitives import PRIMITIVES


class AnalyticModel:
    """Seconds = work x a per-primitive rate: a cost model whose optimum is computable."""

    rates = dict(gemm=1e-11, spmm_u=1e-9, spmm_w=3e-9, spmm_att=3e-9, sddmm=2e-9,
                 edge_softmax=4e-9, rowbcast=5e-10, elementwise=5e-10)

    def predict_many(self, names, rows, works):
        return np.asarray(works) * np.asarray([self.rates[n] for n in names])


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.gcn = GCNConv(16, 64)
        self.gat = GATConv(64, 8)
        self.tag = TAGConv(8, 8, K=2)

    def forward(self, graph, x):
        return self.tag(graph, self.gat(graph, torch.relu(self.gcn(graph, x))))


def test_optimize_picks_the_cheapest_candidate_and_keeps_results():
    graph = rmat(8, 2000, seed=3)
    model = TwoLayers()
    x = torch.randn(graph.num_nodes, 16)
    before = model(graph, x)
    plan = optimize(model, graph, training=False, cost_model=AnalyticModel())
    for decision, (_, layer) in zip(plan.decisions, [("gcn", model.gcn), ("gat", model.gat),
                                                     ("tag", model.tag)]):
        assert layer.plan == decision.chosen
        assert decision.chosen == min(decision.costs, key=lambda item: item[1])[0]
        assert [c for c, _ in decision.costs] == layer_candidates(layer)
    torch.testing.assert_close(model(graph, x), before, rtol=1e-4, atol=1e-5)
    text = str(plan)
    assert "gcn: GCNConv 16 -> 64" in text and "*" in text and "ms" in text
    assert plan.overhead_s > 0


def test_cost_is_the_sum_of_primitive_predictions():
    graph = grid_2d(5, 5)
    layer = GCNConv(8, 8)
    plans = layer_candidates(layer)
    symbols = dict(I=8, O=8, H=1, D=8, Nd=25, Ns=25, E=100)
    features = dict(num_src_nodes=25, num_dst_nodes=25, num_edges=100, density=0.16,
                    degree_mean=4, degree_std=0.5, degree_max=5, degree_skew=-1,
                    frac_degree_over_4=0.5, frac_degree_over_16=0, frac_degree_over_64=0,
                    frac_degree_over_256=0)
    costs = cost_plans([plans], [symbols], [features], False, AnalyticModel())[0]
    assert len(costs) == len(plans) == 4 and len(set(costs)) > 1
    one = cost_plans([[plans[0]]], [symbols], [features], False, AnalyticModel())[0][0]
    assert one == pytest.approx(costs[0])
    assert len(primitives(plans[0])) == 3
    del graph


def test_optimize_without_planned_layers_is_an_error():
    with pytest.raises(ValueError, match="no layer that runs a plan"):
        optimize(nn.Linear(3, 3), grid_2d(2, 2), cost_model=AnalyticModel())


def test_profile_fit_save_load_round_trip(tmp_path):
    pytest.importorskip("xgboost")
    from gnnforge.plan._profile import ProfileConfig, collect, fit, held_out_errors

    graphs = [("grid", "road", grid_2d(6, 6)), ("rmat", "power-law", rmat(6, 300, seed=1))]
    config = ProfileConfig(widths=(8, 16), heads=(1, 2), repeats=1)
    records = collect(graphs, config, progress=False)
    assert {r["primitive"] for r in records} == set(PRIMITIVES)
    assert all(r["seconds"] > 0 for r in records)
    errors = held_out_errors(records, ["grid"])
    assert set(errors) == set(PRIMITIVES) and all(e["calls"] > 0 for e in errors.values())
    model = fit(records)
    model.save(tmp_path)
    loaded = CostModel.load(tmp_path)
    rows = [[1.0] * 5, [3.0, 2.0, 4.0, 0.0, 1.0]]
    assert np.allclose(model.predict("gemm", rows, [10.0, 20.0]),
                       loaded.predict("gemm", rows, [10.0, 20.0]))
    plan = optimize(GCNConv(8, 16), grid_2d(6, 6), cost_model=loaded)
    assert len(plan.decisions) == 1


def test_forest_walk_equals_xgboost(tmp_path):
    xgboost = pytest.importorskip("xgboost")
    import json

    from gnnforge.plan._forest import Forest, ForestSet

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(300, 4)).astype(np.float32)
    target = rows[:, 0] * 2 + np.sin(rows[:, 1]) + (rows[:, 2] > 0.3)
    booster = xgboost.train(dict(max_depth=4, eta=0.3, nthread=1), xgboost.DMatrix(rows, target),
                            40)
    forest = Forest.from_xgboost_json(json.loads(bytes(booster.save_raw(raw_format="json"))))
    np.testing.assert_allclose(forest.predict(rows), booster.inplace_predict(rows), atol=1e-4)
    both = ForestSet.of({"a": forest, "b": forest})
    padded = np.concatenate([rows, np.zeros((300, 0), np.float32)], axis=1)
    np.testing.assert_allclose(both.predict(np.arange(300) % 2, padded),
                               booster.inplace_predict(rows), atol=1e-4)
    # the compiled walk equals the NumPy walk, NaN features (go right) included
    rows[::7, 1] = np.nan
    which = rng.integers(0, 2, size=300)
    np.testing.assert_allclose(both.predict(which, rows), both.predict_numpy(which, rows),
                               rtol=1e-12)
    assert both.predict(np.zeros(0, np.int64), rows[:0]).shape == (0,)


def test_missing_model_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="gnnforge plan profile"):
        CostModel.load(tmp_path)


@pytest.mark.skipif(not (MODELS_DIR / "gemm.json").exists(), reason="no shipped models yet")
def test_shipped_models_give_decisions_without_profiling():
    model = TwoLayers()
    plan = optimize(model, rmat(8, 2000, seed=3), training=True)
    assert all(d.chosen in [c for c, _ in d.costs] for d in plan.decisions)
    assert all(seconds > 0 for d in plan.decisions for _, seconds in d.costs)
