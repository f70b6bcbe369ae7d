"""Which fingerprint differences make the planner measure: only the kernel classes the
planned layers run, and only where both sides chose a variant."""

from __future__ import annotations

import pytest
import torch

from gnnforge import ops
from gnnforge.data import rmat
from gnnforge.nn import (GATConv, GATv2Conv, GCNConv, GINConv, RGCNConv, SAGEConv, SGConv,
                         TAGConv)
from gnnforge.plan import auto_plans, configure_auto, enumerate_compositions, fingerprint
from gnnforge.plan._fingerprint import is_planned_kernel, mismatches

from .test_optimize import AnalyticModel

UNRELATED = "kernel:copy_lhs.max.float32.int32.w32B"   # SAGE 'max' is not planned
RELEVANT = "kernel:copy_lhs.sum.float32.int32.w32B"    # GCN's dynamic Â X


class Recorded(AnalyticModel):
    """An analytic model recorded with `fingerprint`, trusted outright when it matches."""

    decision_caution = 0.0
    decision_margin = 0.0

    def __init__(self, recorded: dict[str, str]) -> None:
        self.info = {"fingerprint": recorded}


@pytest.fixture
def here(monkeypatch):
    """This process's fingerprint with two kernel classes chosen: the planner sees it."""
    current = dict(fingerprint(), **{UNRELATED: "numba", RELEVANT: "native:avx2"})
    monkeypatch.setattr("gnnforge.plan._auto.current_fingerprint", lambda: current)
    previous = configure_auto(measure="doubt")
    yield current
    configure_auto(**vars(previous))


def _plan_entry(recorded: dict[str, str]):
    configure_auto(cost_model=Recorded(recorded))
    graph = rmat(6, 300, seed=3)
    layer = GCNConv(8, 4)
    layer(graph, torch.randn(graph.num_nodes, 8))
    (entry,) = auto_plans(layer).values()
    return entry


def test_a_record_differing_only_in_an_unrelated_class_keeps_the_models_trusted(here):
    entry = _plan_entry(dict(here, **{UNRELATED: "native:sse2"}))
    assert entry.race is None and entry.reason == "" and entry.plan == entry.decision.chosen


def test_a_differing_relevant_class_makes_the_layer_measure(here):
    entry = _plan_entry(dict(here, **{RELEVANT: "numba"}))
    assert entry.race is not None
    assert entry.reason == f"fingerprint mismatch: {RELEVANT}: numba -> native:avx2"


def test_a_relevant_class_not_measured_here_is_no_mismatch_by_itself(here):
    streaming = "kernel:copy_lhs.sum.float32.int32.w1024B.stream"  # recorded, not measured
    assert streaming not in here
    entry = _plan_entry(dict(here, **{streaming: "native:sse2"}))
    assert entry.race is None
    # ... while a machine difference still is
    assert mismatches(dict(here, cpu_flags="0" * 16), here) == [
        f"cpu_flags: {'0' * 16} -> {here['cpu_flags']}"]


@pytest.mark.parametrize("key, compared", [
    ("kernel:copy_lhs.sum.float32.int32.w32B", True),
    ("kernel:copy_lhs.mean.float64.int64.w256B.stream", True),
    ("kernel:mul_heads.sum.float32.int32.w64B", True),
    ("kernel:sddmm_dot.-.float32.int32.w32B", True),
    ("kernel:copy_rhs.sum.float32.int32.w32B", True),
    ("kernel:copy_lhs.max.float32.int32.w32B", False),
    ("kernel:extreme_grad.-.float32.int32.w32B", False),
    ("kernel:add.sum.float32.int32.w32B", False),
    ("kernel:mul.mean.float32.int32.w32B", False),
    ("kernel:copy_rhs.max.float32.int32.w32B", False),
    ("cpu_model", True), ("backend", True), ("threads", True),
])
def test_which_keys_are_compared(key, compared):
    assert is_planned_kernel(key) is compared
    recorded, current = {key: "a"}, {key: "b"}
    assert bool(mismatches(recorded, current)) is compared


PLANNED = {
    "gcn": lambda: GCNConv(24, 24),
    "gcn-unnormalised": lambda: GCNConv(24, 24, normalize=False),
    "sgc": lambda: SGConv(24, 24, K=2),
    "tag": lambda: TAGConv(24, 24, K=2),
    "gat": lambda: GATConv(24, 12, heads=2),
    "gat-one-head": lambda: GATConv(24, 24),
    "gatv2": lambda: GATv2Conv(24, 12, heads=2),
    "sage-mean": lambda: SAGEConv(24, 24),
    "sage-sum": lambda: SAGEConv(24, 24, aggr="sum"),
    "gin": lambda: GINConv(torch.nn.Linear(24, 24), train_eps=True),
    "rgcn-mean": lambda: RGCNConv(24, 24, 3),
    "rgcn-basis": lambda: RGCNConv(24, 24, 3, num_bases=2, aggr="sum"),
    "rgcn-block": lambda: RGCNConv(24, 24, 3, num_blocks=2),
}


@pytest.mark.parametrize("name", sorted(PLANNED))
def test_every_kernel_class_a_planned_layer_runs_is_compared(name, monkeypatch):
    """Every composition of every planned layer, forward and backward, under the measured
    ("auto") kernel selection: each kernel class it asks for is one `mismatches` compares.
    (A new primitive in a planned layer, or a new kernel class in ops, fails here.)"""
    from gnnforge.ops import _calibration

    asked: set[str] = set()

    def choice(kernel_class, kernels):
        asked.add(kernel_class.key())
        return "numba"  # a candidate of every class; nothing is timed

    monkeypatch.setattr(_calibration, "choice", choice)
    # Without trials every call asks the selection (a class settled by trials earlier in
    # the process would not).
    monkeypatch.setenv("GNNFORGE_KERNEL_TRIALS", "0")
    graph = rmat(6, 300, seed=4)
    layer = PLANNED[name]()
    extra = ((torch.randint(0, 3, (graph.num_edges,)),) if name.startswith("rgcn") else ())
    with ops.use_backend("auto"):
        for composition in enumerate_compositions(layer.plan_expression()):
            layer.plan = composition
            x = torch.randn(graph.num_nodes, 24, requires_grad=True)
            layer(graph, x, *extra).square().sum().backward()
    assert asked  # the selection was consulted
    assert not [key for key in sorted(asked) if not is_planned_kernel(f"kernel:{key}")]


def test_the_shipped_models_were_fitted_on_the_current_kernel_sources():
    """A kernel edit without a refit makes every planned layer measure on the machine the
    models ship for (their `native_sources` no longer matches: found 2026-11-27 after three
    kernel commits). Refit after a kernel change, on the machine kind the models ship for
    (docs/planner.md, Re-profiling), rather than editing the recorded digest."""
    import json

    from gnnforge.ops._native_build import sources_digest
    from gnnforge.plan._cost import MODELS_DIR

    for folder, threads in [(MODELS_DIR, 1), *((f, int(f.name.removeprefix("threads-")))
                                               for f in MODELS_DIR.glob("threads-*"))]:
        recorded = json.loads((folder / "info.json").read_text())["fingerprint"]
        assert recorded.get("native_sources") == sources_digest(), (
            f"the shipped cost models in {folder} were fitted on native sources "
            f"{recorded.get('native_sources')}, the kernels here are {sources_digest()}: "
            f"refit them (`gnnforge plan profile --threads {threads}`, docs/planner.md) "
            "after a kernel edit")
        assert recorded.get("threads") == str(threads), (
            f"{folder} holds models fitted at {recorded.get('threads')} threads; the "
            f"folder is read for {threads}")


def test_the_shipped_models_are_chosen_by_the_thread_count(tmp_path, monkeypatch):
    """A process at N threads reads models/threads-N when gnnforge ships one (the default
    2-thread process here used to judge itself by the 1-thread fit and measure every
    choice: `threads: 1 -> 2`), else the 1-thread models (then a mismatch: it measures)."""
    from gnnforge.plan import _cost
    from gnnforge.plan._cost import CostModel, shipped_models_dir

    shipped = CostModel.load(_cost.MODELS_DIR)
    shipped.save(tmp_path)
    shipped.info = dict(shipped.info, fingerprint=dict(shipped.info["fingerprint"],
                                                        threads="2"))
    shipped.save(tmp_path / "threads-2")
    monkeypatch.setattr(_cost, "MODELS_DIR", tmp_path)
    assert shipped_models_dir(2) == tmp_path / "threads-2"
    assert shipped_models_dir(1) == shipped_models_dir(3) == tmp_path
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert CostModel.load().info["fingerprint"]["threads"] == "2"
