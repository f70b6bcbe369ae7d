"""Kernel choice refined on the real input (`_trials`): close classes time their contenders
on the first call on a graph and keep the fastest; clear, small or disabled ones do not."""

from __future__ import annotations

import weakref

import pytest
import torch

from gnnforge.ops import _auto_kernels, _kernel_class, _trials, _tuning_record
from gnnforge.ops._kernel_class import KernelClass

SUM64 = KernelClass("copy_lhs", "sum", "float32", "int32", 2)
CALIBRATED = "numba"  # the calibration's choice for SUM64 in `calibrated`, handed to trials
BIG = 2**23          # work above _MIN_WORK, the calibration input's size for SUM64


@pytest.fixture
def calibrated(monkeypatch):
    """A class calibrated as numba 1.0 ms, native:sse2 1.2 ms, mkl 5 ms (clearly slower);
    candidates that advance a fake clock by their real-input cost (in ms); returns the call
    log."""
    _trials.forget()
    monkeypatch.delenv("GNNFORGE_KERNEL_TRIALS", raising=False)
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {SUM64.key(): {
        "choice": "numba", "min_ms": {"numba": 1.0, "native:sse2": 1.2, "mkl": 5.0}}})
    now = [0.0]
    monkeypatch.setattr(_trials, "_clock", lambda: now[0])
    calls: list[str] = []

    def runner(cost: dict[str, float], bits: dict[str, float] | None = None):
        """Candidates costing `cost[name]` on the fake clock; their results are equal
        unless `bits` gives one another value; `result.ran` names who computed it."""
        def call(name: str) -> torch.Tensor:
            calls.append(name)
            now[0] += cost[name] * 1e-3
            result = torch.full((3,), (bits or {}).get(name, 0.0))
            result.ran = name
            return result
        return call

    yield calls, runner
    _trials.forget()


def test_a_close_class_keeps_the_real_inputs_fastest(calibrated):
    calls, runner = calibrated
    call = runner({"numba": 3.0, "native:sse2": 1.0})     # the real graph prefers SSE2
    assert _trials.contenders(SUM64, CALIBRATED) == ["numba", "native:sse2"]
    _trials.run(SUM64, CALIBRATED, (1,), BIG, call)
    assert trial_choice() == "native:sse2"
    assert "mkl" not in calls                              # over 2x in calibration: not timed
    assert calls.count("numba") == _trials._WARMUP_RUNS + 2 * _trials._TIMED_RUNS
    calls.clear()
    assert _trials.run(SUM64, CALIBRATED, (1,), BIG, call).ran == "native:sse2"
    assert calls == ["native:sse2"]                        # decided: one call, no timing
    (result,) = _trials.trial_results()
    assert result["choice"] == "native:sse2" and result["calibrated"] == "numba"
    assert result["ms"]["numba"] > result["ms"]["native:sse2"]


def trial_choice() -> str:
    return _trials.trial_results()[-1]["choice"]


def test_the_result_returned_has_the_winners_bits_and_is_not_rerun(calibrated):
    calls, runner = calibrated
    # SSE2 wins; the calibrated choice's result (the same bits) is returned, not rerun.
    result = _trials.run(SUM64, CALIBRATED, (2,), BIG, runner({"numba": 20.0,
                                                               "native:sse2": 10.0}))
    assert trial_choice() == "native:sse2" and torch.equal(result, torch.zeros(3))
    assert len(calls) == 2 * (_trials._WARMUP_RUNS + 2 * _trials._TIMED_RUNS)


@pytest.mark.parametrize("cost", [1.0, 2000.0])             # ms: short calls, long ones
def test_a_trial_holds_one_output_besides_the_call_in_flight(calibrated, monkeypatch, cost):
    calls, runner = calibrated
    alive: weakref.WeakSet = weakref.WeakSet()
    most_alive = [0]
    inner = runner({"numba": cost, "native:sse2": cost, "mkl": cost})

    def call(name: str) -> torch.Tensor:
        most_alive[0] = max(most_alive[0], len(alive))   # outputs held when a call starts
        result = inner(name)
        alive.add(result)
        return result

    with_mkl = {SUM64.key(): {"choice": "numba",
                              "min_ms": {"numba": 1.0, "native:sse2": 1.2, "mkl": 1.5}}}
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: with_mkl)
    _trials.run(SUM64, CALIBRATED, (13,), BIG, call)
    assert set(calls) == {"numba", "native:sse2", "mkl"}
    assert most_alive[0] == 1                  # the calibrated choice's result only


def test_long_calls_get_one_warm_up_and_fewer_timed_calls(calibrated, monkeypatch):
    calls, runner = calibrated
    # 2 s and 1 s calls (a full-graph SpMM at 100M edges): every first call was long.
    result = _trials.run(SUM64, CALIBRATED, (14,), BIG, runner({"numba": 2000.0,
                                                                "native:sse2": 1000.0}))
    assert trial_choice() == "native:sse2" and torch.equal(result, torch.zeros(3))
    assert calls == ["numba", "native:sse2"] * (1 + _trials._LONG_TIMED_RUNS)
    calls.clear()
    # A long contender more than 2x behind the fastest first call is not timed again.
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {SUM64.key(): {
        "choice": "numba", "min_ms": {"numba": 1.0, "native:sse2": 1.2, "mkl": 1.5}}})
    _trials.run(SUM64, CALIBRATED, (16,), BIG,
                runner({"numba": 2000.0, "native:sse2": 1000.0, "mkl": 2500.0}))
    assert calls.count("mkl") == 1 and calls.count("numba") == 1 + _trials._LONG_TIMED_RUNS
    assert trial_choice() == "native:sse2"
    assert _trials.trial_results()[-1]["ms"]["mkl"] == 2500.0
    calls.clear()
    # One contender short: the usual warm-ups and rounds.
    _trials.run(SUM64, CALIBRATED, (15,), BIG,
                runner({"numba": 2000.0, "native:sse2": 1.0, "mkl": 2000.0}))
    assert calls.count("numba") == _trials._WARMUP_RUNS + 2 * _trials._TIMED_RUNS


def test_timed_calls_run_in_rounds_each_after_its_own_untimed_call(calibrated):
    calls, runner = calibrated
    _trials.run(SUM64, CALIBRATED, (3,), BIG, runner({"numba": 10.0, "native:sse2": 20.0}))
    warm = 2 * _trials._WARMUP_RUNS
    assert calls[:warm] == ["numba", "native:sse2"] + ["numba"] * (_trials._WARMUP_RUNS - 1) \
        + ["native:sse2"] * (_trials._WARMUP_RUNS - 1)
    assert calls[warm:] == ["numba", "numba", "native:sse2", "native:sse2"] * _trials._TIMED_RUNS


def test_short_calls_get_more_timed_rounds_within_a_budget(calibrated):
    calls, runner = calibrated
    _trials.run(SUM64, CALIBRATED, (8,), BIG, runner({"numba": 1e-2, "native:sse2": 1e-2}))
    assert calls.count("numba") == _trials._WARMUP_RUNS + 2 * _trials._MAX_TIMED_RUNS
    calls.clear()
    # 1 ms calls: a round of two contenders takes 4 ms; rounds stop once 20 ms are spent.
    _trials.run(SUM64, CALIBRATED, (9,), BIG, runner({"numba": 1.0, "native:sse2": 1.0}))
    rounds = (calls.count("numba") - _trials._WARMUP_RUNS) // 2
    assert rounds == round(_trials._ROUNDS_BUDGET_S / 4e-3)


def test_a_burst_during_a_trial_does_not_decide_it(calibrated, monkeypatch):
    calls, runner = calibrated
    # A neighbour's burst makes calls 7-12 three times slower. Timed back to back, it
    # would cover all of SSE2's timed calls (8-10) and numba would win; in rounds SSE2
    # (0.9x numba's cost) keeps a clean timed call and wins.
    now = [0.0]
    monkeypatch.setattr(_trials, "_clock", lambda: now[0])

    def call(name):
        calls.append(name)
        burst = 3.0 if 7 <= len(calls) <= 12 else 1.0
        now[0] += (0.9 if name == "native:sse2" else 1.0) * burst * 1e-3      # ms
        return torch.zeros(3)
    _trials.run(SUM64, CALIBRATED, (4,), BIG, call)
    assert trial_choice() == "native:sse2"


def test_a_faster_contender_with_other_bits_cannot_win(calibrated):
    calls, runner = calibrated
    # SSE2 is faster here, but its sums differ in the last bit from the calibrated numba's:
    # switching would make the results depend on timings.
    result = _trials.run(SUM64, CALIBRATED, (6,), BIG, runner({"numba": 3.0, "native:sse2": 1.0},
                                                  bits={"native:sse2": 1e-7}))
    assert result.ran == "numba" and torch.equal(result, torch.zeros(3))
    (trial,) = _trials.trial_results()
    assert trial["choice"] == "numba" and trial["different_bits"] == ["native:sse2"]


def test_same_bits_compares_values_and_winner_indices_across_index_dtypes():
    values = torch.tensor([[1.0, 2.0]])
    assert _trials._same_bits((values, torch.tensor([[3, 4]], dtype=torch.int32)),
                              (values.clone(), torch.tensor([[3, 4]])))
    assert not _trials._same_bits((values, torch.tensor([[3, 4]])),
                                  (values, torch.tensor([[3, 5]])))
    assert not _trials._same_bits(values, values + 1e-7)
    assert not _trials._same_bits(values, values.double())


def test_small_calls_run_the_calibrated_choice_untimed(calibrated):
    calls, runner = calibrated
    assert _trials.run(SUM64, CALIBRATED, (3,), _trials._MIN_WORK - 1,
                       runner({"numba": 3.0, "native:sse2": 1.0})).ran == "numba"
    assert calls == ["numba"] and _trials.trial_results() == []


def test_a_clear_calibration_is_not_timed_again(calibrated, monkeypatch):
    calls, runner = calibrated
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {SUM64.key(): {
        "choice": "numba", "min_ms": {"numba": 1.0, "native:sse2": 2.5}}})
    result = _trials.run(SUM64, CALIBRATED, (4,), BIG, runner({"numba": 3.0, "native:sse2": 1.0}))
    assert result.ran == "numba"
    assert calls == ["numba"]


def test_a_call_far_from_the_calibration_size_times_more_contenders(calibrated, monkeypatch):
    calls, runner = calibrated
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {SUM64.key(): {
        "choice": "numba", "min_ms": {"numba": 1.0, "native:sse2": 2.5, "mkl": 5.0}}})
    calibrated_work = _kernel_class.representative_work(SUM64)
    far = _trials._FAR_FACTOR * calibrated_work
    assert _trials.contenders(SUM64, CALIBRATED, calibrated_work) == ["numba"]
    assert _trials.contenders(SUM64, CALIBRATED, far) == ["numba", "native:sse2"]
    assert _trials.contenders(SUM64, CALIBRATED, calibrated_work // _trials._FAR_FACTOR) \
        == ["numba", "native:sse2"]
    assert _trials.contenders(SUM64, CALIBRATED, far - 1) == ["numba"]
    # R-MAT 2^17 at F=64 under SSE2: the calibration graph preferred numba 2.5x, the
    # 16x larger real graph prefers the SSE2 build.
    _trials.run(SUM64, CALIBRATED, (7,), 16 * calibrated_work,
                runner({"numba": 1.6, "native:sse2": 1.0}))
    assert trial_choice() == "native:sse2" and "mkl" not in calls


def test_forms_handed_in_contend_beyond_the_ratio_and_the_count(calibrated, monkeypatch):
    """The caller's forms of the calibrated choice (other ways to compute its bits, which
    the calibration does not time) are contenders on every real graph, after the close
    candidates, beyond the contender ratio and count."""
    calls, runner = calibrated
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {SUM64.key(): {
        "choice": "native:avx2", "min_ms": {
            "native:avx2": 1.0, "native:sse2": 1.1, "numba": 1.2, "mkl": 9.0}}})
    forms = ["native:avx2/src8MiB", "native:avx2/src16MiB"]
    assert _trials.contenders(SUM64, "native:avx2", forms=forms) == [
        "native:avx2", "native:sse2", "numba", *forms]
    # A calibrated choice without timings (one candidate, or a record's bare choice).
    assert _trials.contenders(SUM64, "native:avx512", forms=["native:avx512/src8MiB"]) == [
        "native:avx512", "native:avx512/src8MiB"]
    # On a dense graph far larger than the cache a form wins; the forms are asked for
    # only when a new graph is trialled.
    asked = []
    _trials.run(SUM64, "native:avx2", (8,), BIG, runner({
        "native:avx2": 4.0, "native:sse2": 4.0, "numba": 4.0,
        "native:avx2/src8MiB": 1.0, "native:avx2/src16MiB": 2.0}),
        forms=lambda: asked.append(1) or forms)
    assert trial_choice() == "native:avx2/src8MiB" and asked == [1]
    _trials.run(SUM64, "native:avx2", (8,), BIG, runner({"native:avx2/src8MiB": 1.0}),
                forms=lambda: asked.append(1) or forms)
    assert asked == [1]


def test_representative_work_is_edges_times_the_representative_width():
    nodes, edges = _kernel_class.representative_size(SUM64)
    assert _kernel_class.representative_work(SUM64) == edges * 64           # 256-byte float32 rows
    doubles = SUM64._replace(dtype="float64")
    assert _kernel_class.representative_work(doubles) == edges * 32
    streaming = SUM64._replace(size=1)
    assert _kernel_class.representative_work(streaming) == \
        _kernel_class.representative_size(streaming)[1] * 64


def test_after_a_few_graphs_new_graphs_run_the_most_frequent_winner(calibrated):
    calls, runner = calibrated
    costs = [{"numba": 1.0, "native:sse2": 2.0}] + [{"numba": 2.0, "native:sse2": 1.0}] * 2
    for graph, cost in enumerate(costs):
        _trials.run(SUM64, CALIBRATED, (10 + graph,), BIG, runner(cost))
    assert len(_trials.trial_results()) == _trials._GRAPHS_PER_CLASS
    calls.clear()
    # A fourth graph (a new sampled minibatch) is not timed: SSE2 won 2 of 3.
    result = _trials.run(SUM64, CALIBRATED, (99,), BIG, runner({"numba": 1.0, "native:sse2": 9.0}))
    assert result.ran == "native:sse2"
    assert calls == ["native:sse2"]


def test_a_verdict_holds_for_graphs_of_its_size_only(calibrated):
    calls, runner = calibrated
    for graph in range(_trials._GRAPHS_PER_CLASS):          # large graphs: SSE2 wins
        _trials.run(SUM64, CALIBRATED, (20 + graph,), 64 * BIG,
                    runner({"numba": 2.0, "native:sse2": 1.0}))
    assert _trials.class_choice(SUM64, CALIBRATED, 64 * BIG) == "native:sse2"
    # The same power-of-4 bucket; no verdict at BIG: the calibrated choice.
    assert _trials.class_choice(SUM64, CALIBRATED, 96 * BIG) == "native:sse2"
    assert _trials.class_choice(SUM64, CALIBRATED, BIG) == "numba"
    calls.clear()
    # A graph 64x smaller is timed on its own, and numba wins there.
    result = _trials.run(SUM64, CALIBRATED, (30,), BIG, runner({"numba": 1.0, "native:sse2": 2.0}))
    assert result.ran == "numba"
    assert set(calls) == {"numba", "native:sse2"}
    assert [_trials.size_bucket(w) for w in (1, 3, 4, 15, 16)] == [0, 1, 1, 2, 2]


@pytest.mark.parametrize("how", ["environment", "deterministic"])
def test_trials_can_be_turned_off(calibrated, monkeypatch, how):
    calls, runner = calibrated
    if how == "environment":
        monkeypatch.setenv("GNNFORGE_KERNEL_TRIALS", "0")
    else:
        monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    result = _trials.run(SUM64, CALIBRATED, (5,), BIG, runner({"numba": 3.0, "native:sse2": 1.0}))
    assert result.ran == "numba"
    assert calls == ["numba"]


# ----------------------------------------------------------------------- with real kernels


@pytest.fixture
def every_candidate_contends(tmp_path, monkeypatch):
    """A fresh tuning record, and every calibrated candidate a contender."""
    from gnnforge.ops import _native_build

    for variant in _native_build.available_variants():   # loaded (built) before the cache
        _native_build.load(variant.name)                  # moves: no minute of g++ here
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv("GNNFORGE_KERNEL_TRIALS", raising=False)
    monkeypatch.setattr(_trials, "_CONTENDER_RATIO", float("inf"))
    monkeypatch.setattr(_trials, "_MAX_CONTENDERS", 8)
    _auto_kernels.forget()
    yield
    _auto_kernels.forget()


def _graph(nodes: int, edges: int, seed: int):
    from gnnforge.graph import Graph

    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, nodes, (edges,), generator=generator)
    dst = torch.randint(0, nodes // 2, (edges,), generator=generator)  # half without in-edges
    return Graph(src, dst, nodes), generator


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_calls_that_run_trials_equal_the_reference(every_candidate_contends, index_dtype):
    import gnnforge.ops as ops

    graph, generator = _graph(600, 5000, seed=7)
    x = torch.randn(600, 32, generator=generator)
    weights = torch.rand(5000, generator=generator)

    def compute():
        leaf = x.clone().requires_grad_(True)
        outputs = [ops.copy_u_sum(graph, leaf), ops.copy_u_mean(graph, leaf),
                   ops.copy_u_max(graph, leaf), ops.u_mul_e_sum(graph, leaf, weights),
                   ops.u_dot_v(graph, leaf, leaf)]
        grad, = torch.autograd.grad(sum(out.square().sum() for out in outputs), leaf)
        return [out.detach() for out in outputs] + [grad]

    with ops.use_backend("reference"):
        expected = compute()
    with ops.use_backend("auto", index_dtype=index_dtype):
        first = compute()            # the trials run here
        again = compute()            # the decisions are reused here
    assert _trials.trial_results(), "no trial ran"
    for actual in (first, again):
        for out, reference in zip(actual, expected):
            torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-4)


def test_a_graph_without_edges_runs_untimed(every_candidate_contends):
    import gnnforge.ops as ops
    from gnnforge.graph import Graph

    empty = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 50)
    out = ops.copy_u_sum(empty, torch.randn(50, 64))
    assert torch.equal(out, torch.zeros(50, 64)) and _trials.trial_results() == []


def test_the_class_choice_follows_the_verdict_once_there_is_one(calibrated):
    calls, runner = calibrated
    assert _trials.class_choice(SUM64, CALIBRATED, BIG) == "numba"
    for graph in range(_trials._GRAPHS_PER_CLASS + 1):
        _trials.run(SUM64, CALIBRATED, (20 + graph,), BIG,
                    runner({"numba": 2.0, "native:sse2": 1.0}))
    assert _trials.class_choice(SUM64, CALIBRATED, BIG) == "native:sse2"


def test_a_graph_keeps_its_own_decision_after_the_class_settles(calibrated):
    calls, runner = calibrated
    # numba wins on this graph:
    _trials.run(SUM64, CALIBRATED, (30,), BIG, runner({"numba": 1.0, "native:sse2": 2.0}))
    for graph in range(1, _trials._GRAPHS_PER_CLASS):
        _trials.run(SUM64, CALIBRATED, (30 + graph,), BIG,
                    runner({"numba": 2.0, "native:sse2": 1.0}))
    assert _trials.class_choice(SUM64, CALIBRATED, BIG) == "native:sse2"
    calls.clear()
    result = _trials.run(SUM64, CALIBRATED, (30,), BIG, runner({"numba": 1.0, "native:sse2": 2.0}))
    assert result.ran == "numba"
    assert calls == ["numba"]


def test_choose_names_the_winner_and_then_decides_without_calls(calibrated):
    calls, runner = calibrated
    call = runner({"numba": 3.0, "native:sse2": 1.0})
    assert _trials.choose(SUM64, CALIBRATED, (11,), BIG, call) == "native:sse2"
    assert calls.count("native:sse2") == _trials._WARMUP_RUNS + 2 * _trials._TIMED_RUNS
    calls.clear()
    assert _trials.choose(SUM64, CALIBRATED, (11,), BIG, call) == "native:sse2"
    assert calls == []                                   # the caller runs it, not choose
    assert _trials.choose(SUM64, CALIBRATED, (12,), _trials._MIN_WORK - 1, call) == CALIBRATED
    assert calls == []
