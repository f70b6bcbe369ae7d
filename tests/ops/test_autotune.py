"""Kernel selection by measurement: the winner is the measured fastest, recorded per machine,
read back by later processes, recalibrated when corrupt or stale, forced by environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gnnforge
from gnnforge.ops import (
    _auto_kernels,
    _calibration,
    _cpu_kernels,
    _kernel_class,
    _native_build,
    _trials,
    _tuning_record,
)
from gnnforge.ops._kernel_class import KernelClass
from tests._timeouts import SUBPROCESS_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
SUM64 = KernelClass("copy_lhs", "sum", "float32", "int32", 2)


def _fake_runners(monkeypatch, seconds: dict[str, float]) -> list[str]:
    """Candidates that take a set time on the calibration's clock instead of running
    kernels (`_clocked_runners`, never descheduled); returns the call log."""
    calls: list[str] = []
    _clocked_runners(monkeypatch, {name: [(value, 1.0)] for name, value in seconds.items()},
                     log=calls)
    return calls


def test_the_measured_fastest_candidate_wins_even_when_it_is_the_narrowest(fresh_cache,
                                                                           monkeypatch):
    # A machine where AVX2 loses to SSE2 (issue 14's VM): the choice follows the clock.
    _fake_runners(monkeypatch, {"native:sse2": 0.001, "native:avx2": 0.004, "numba": 0.003})
    assert _calibration.choice(SUM64, _cpu_kernels) == "native:sse2"
    entry = _tuning_record.measured_classes()[SUM64.key()]
    assert entry["choice"] == "native:sse2"
    assert set(entry["min_ms"]) == {"native:sse2", "native:avx2", "numba"}
    assert entry["min_ms"]["native:avx2"] > entry["min_ms"]["native:sse2"]


def test_a_recorded_choice_is_read_back_without_timing(fresh_cache, monkeypatch):
    calls = _fake_runners(monkeypatch, {"numba": 0.002, "native:sse2": 0.0005})
    assert _calibration.choice(SUM64, _cpu_kernels) == "native:sse2"
    measured = len(calls)
    _auto_kernels.forget()                      # as a new process would start
    assert _calibration.choice(SUM64, _cpu_kernels) == "native:sse2"
    assert len(calls) == measured
    assert _tuning_record.kernel_choices() == {SUM64.key(): "native:sse2"}


def test_a_corrupt_record_is_measured_again_with_one_warning(fresh_cache, monkeypatch):
    _fake_runners(monkeypatch, {"numba": 0.001, "native:sse2": 0.002})
    path = _tuning_record.record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="unreadable or stale"):
        assert _calibration.choice(SUM64, _cpu_kernels) == "numba"
    assert json.loads(path.read_text())["classes"][SUM64.key()]["choice"] == "numba"


def test_a_record_from_another_machine_is_measured_again(fresh_cache, monkeypatch):
    _fake_runners(monkeypatch, {"numba": 0.001, "native:sse2": 0.002})
    path = _tuning_record.record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    foreign = dict(_tuning_record.machine_fingerprint(), cpu_model="Another CPU")
    path.write_text(json.dumps({"fingerprint": foreign,
                                "classes": {SUM64.key(): {"choice": "native:sse2"}}}))
    with pytest.warns(RuntimeWarning, match="another machine"):
        assert _calibration.choice(SUM64, _cpu_kernels) == "numba"


def test_the_isa_restriction_limits_native_variants_and_keys_its_own_record(fresh_cache,
                                                                            monkeypatch):
    unrestricted = _tuning_record.record_path()
    monkeypatch.setenv("GNNFORGE_ISA", "sse2")
    names = _cpu_kernels.candidates(SUM64)
    natives = [name for name in names if name.startswith("native:")]
    assert [name for name in natives if "/" not in name] in ([], ["native:sse2"])
    assert all(name.startswith("native:sse2/src") for name in natives if "/" in name)
    assert "numba" in names and "mkl" in names
    assert _tuning_record.record_path() != unrestricted
    monkeypatch.setenv("GNNFORGE_ISA", "avx9")
    with pytest.raises(ValueError, match="GNNFORGE_ISA must be one of"):
        _cpu_kernels.candidates(SUM64)


def test_single_candidate_classes_are_not_timed(fresh_cache, monkeypatch):
    calls = _fake_runners(monkeypatch, {"numba": 0.001})
    # g-SpMM with dot has only numba's kernel (the native library has add and mul).
    dot = KernelClass("dot", "sum", "float32", "int32", 0)
    assert _calibration.choice(dot, _cpu_kernels) == "numba"
    assert calls == []


def test_width_classes_follow_row_bytes():
    assert [_kernel_class.width_class(width, torch.float32) for width in (1, 15, 16, 63, 64, 255,
                                                                       256, 4096)] == \
        [0, 0, 1, 1, 2, 2, 3, 3]
    assert _kernel_class.width_class(32, torch.float64) == 2


def test_real_calibration_picks_a_candidate_that_computes_the_reference(fresh_cache):
    graph_class = KernelClass("copy_lhs", "mean", "float32", "int64", 1)
    winner = _calibration.choice(graph_class, _cpu_kernels)
    assert winner in _cpu_kernels.candidates(graph_class)
    entry = _tuning_record.measured_classes()[graph_class.key()]
    assert all(ms > 0 for ms in entry["min_ms"].values())


def _run(script: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_extra)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=SUBPROCESS_TIMEOUT_S)


def test_gnnforge_backend_forces_every_call_and_rejects_unknown_names(tmp_path):
    script = ("import torch\nfrom gnnforge.ops._dispatch import choose\n"
              "print(choose('gspmm', torch.device('cpu')).backend)\n")
    result = _run(script, {"GNNFORGE_BACKEND": "numba", "GNNFORGE_CACHE": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["numba"]
    result = _run(script, {"GNNFORGE_BACKEND": "fastest", "GNNFORGE_CACHE": str(tmp_path)})
    assert result.returncode != 0
    assert "GNNFORGE_BACKEND: backend must be one of" in result.stderr


@pytest.mark.slow  # two processes, each starting torch and compiling numba's kernels
def test_concurrent_processes_keep_one_valid_record(tmp_path):
    script = (
        "import sys\n"
        "from gnnforge.ops import _calibration, _cpu_kernels\n"
        "from gnnforge.ops._kernel_class import KernelClass\n"
        "width = int(sys.argv[1])\n"
        "kernel_class = KernelClass('copy_lhs', 'sum', 'float32', 'int32', width)\n"
        "_calibration.choice(kernel_class, _cpu_kernels)\n"
    )
    # Without the native library (its build in a fresh cache would dominate): numba and mkl.
    env = dict(os.environ, PYTHONPATH=str(REPO), GNNFORGE_CACHE=str(tmp_path),
               GNNFORGE_NATIVE="0")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(width)], env=env,
                                  stderr=subprocess.PIPE, text=True) for width in (0, 1)]
    for process in processes:
        assert process.wait(timeout=SUBPROCESS_TIMEOUT_S) == 0, process.stderr.read()
    records = list((tmp_path / "tuning").glob("kernels-*.json"))
    assert len(records) == 1
    classes = json.loads(records[0].read_text())["classes"]
    assert {key.split(".")[-1] for key in classes} == {"w32B", "w64B"}


def _copy_native_libraries(target: Path) -> None:
    """The native builds of the suite's cache, with their hash records, copied to `target`:
    doctor() reports (so loads) every variant, which in an empty cache means a minute of
    g++ that this test is not about (test_native_build.py tests building and its cache)."""
    from gnnforge.ops._native_build import available_variants, build

    (target / "native").mkdir(parents=True, exist_ok=True)
    for variant in available_variants():
        try:
            source = build(variant.name)
        except Exception:  # no compiler: doctor() says so, as it will in the copy
            continue
        for path in (source, source.with_suffix(".json")):
            shutil.copyfile(path, target / "native" / path.name)


def test_doctor_lists_measured_classes(tmp_path, monkeypatch):
    _copy_native_libraries(tmp_path)  # before the cache moves there
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    _auto_kernels.forget()
    try:
        _fake_runners(monkeypatch, {"numba": 0.001, "native:sse2": 0.002})
        report = gnnforge.doctor()
        assert "no kernel class measured yet" in report
        assert "native kernel library:" in report
        _calibration.choice(SUM64, _cpu_kernels)
        report = gnnforge.doctor()
        assert SUM64.key() in report and "-> numba" in report
    finally:
        _auto_kernels.forget()


def test_streaming_calls_are_their_own_class_keyed_and_read_back(fresh_cache, monkeypatch):
    monkeypatch.setattr(_kernel_class, "last_level_cache_bytes", lambda: 1000)
    assert _kernel_class.size_class(10 * 16 * 4) == _kernel_class.FITS
    assert _kernel_class.size_class(100 * 16 * 4) == _kernel_class.STREAMS
    streaming = SUM64._replace(size=_kernel_class.STREAMS)
    assert streaming.key() == SUM64.key() + ".stream"
    assert _kernel_class.parse_key(streaming.key()) == streaming
    assert _kernel_class.parse_key(SUM64.key()) == SUM64
    nodes, edges = _kernel_class.representative_size(streaming)
    assert (nodes, edges) != _kernel_class.representative_size(SUM64) and edges == 2 * nodes
    calls = _fake_runners(monkeypatch, {"numba": 0.0, "native:sse2": 0.003})
    assert _calibration.choice(streaming, _cpu_kernels) == "numba"
    assert set(_tuning_record.kernel_choices()) == {streaming.key()}
    assert calls  # measured, not guessed


def test_clearly_slower_candidates_leave_the_race(fresh_cache, monkeypatch):
    calls = _fake_runners(monkeypatch, {"numba": 0.001, "native:sse2": 0.02})
    assert _calibration.choice(SUM64, _cpu_kernels) == "numba"
    # warm-up and two rounds for the slow one; the fast one runs every round
    assert calls.count("native:sse2") == 3 and calls.count("numba") >= 4
    entry = _tuning_record.measured_classes()[SUM64.key()]
    assert set(entry["min_ms"]) == {"numba", "native:sse2"}


def test_the_isa_restriction_caps_the_default_native_variant(monkeypatch):
    # Kernels that are not timed (edge softmax, GINE) run the default variant: under
    # GNNFORGE_ISA it must not be wider than the ceiling.
    from gnnforge.ops import _native_build

    names = [variant.name for variant in _native_build.available_variants()]
    monkeypatch.setenv("GNNFORGE_ISA", "sse2")
    assert _native_build.default_variant() in ("sse2", names[0])
    if "avx2" in names:
        monkeypatch.setenv("GNNFORGE_ISA", "avx2")
        assert _native_build.default_variant() == "avx2"
    monkeypatch.delenv("GNNFORGE_ISA")
    assert _native_build.default_variant() == names[-1]


def _random_graph(seed: int, nodes: int, edges: int):
    """A seeded random multigraph and the generator, to draw its features from."""
    from gnnforge.graph import Graph

    generator = torch.Generator().manual_seed(seed)
    graph = Graph(torch.randint(0, nodes, (edges,), generator=generator),
                  torch.randint(0, nodes, (edges,), generator=generator), nodes)
    return graph, generator


@pytest.mark.parametrize("op", ["add", "mul", "dot", "sub"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_sddmm_is_chosen_by_measurement_and_equals_the_reference(fresh_cache, op, index_dtype):
    # (The class's index dtype is that of the edge-row arrays the op reads.)
    import gnnforge.ops as ops

    graph, generator = _random_graph(3, 30, 200)
    x = torch.randn(30, 4, 8, generator=generator)
    y = torch.randn(30, 4, 8, generator=generator)
    with ops.use_backend("reference"):
        expected = ops.gsddmm(graph, op, x, y, "u", "v")
    with ops.use_backend("auto", index_dtype=index_dtype):
        actual = ops.gsddmm(graph, op, x, y, "u", "v")
    torch.testing.assert_close(actual, expected)
    # the public layer computes sub as add with the right operand negated
    (key, entry), = _tuning_record.measured_classes().items()
    assert key.startswith(f"sddmm_{'add' if op == 'sub' else op}.-.float32.")
    assert entry["choice"] in _cpu_kernels.candidates(_kernel_class.parse_key(key))


def test_per_head_edge_weights_are_their_own_class(fresh_cache):
    # GAT's [N, H, D] x [E, H, 1] ranks kernels differently from full-width edge features.
    import gnnforge.ops as ops

    graph, generator = _random_graph(4, 40, 300)
    x = torch.randn(40, 8, 8, generator=generator)
    weights = torch.rand(300, 8, 1, generator=generator)
    with ops.use_backend("reference"):
        expected = ops.u_mul_e_sum(graph, x, weights)
    with ops.use_backend("auto"):
        actual = ops.u_mul_e_sum(graph, x, weights)
    torch.testing.assert_close(actual, expected)
    keys = list(_tuning_record.measured_classes())
    assert any(key.startswith("mul_heads.sum.float32.") for key in keys), keys


@pytest.mark.parametrize("heads, depth, key", [(8, 8, "w32B"), (4, 16, "w64B"),
                                               (2, 32, "w64B"), (8, 64, "w256B")])
def test_per_head_classes_are_keyed_by_one_heads_row(heads, depth, key, monkeypatch):
    # 8 heads of 8 and 4 heads of 16 are 64 floats a node either way, but the AVX-512
    # build ran the first 5x slower than the SSE2 one and the second 1.7x faster.
    from gnnforge.ops import _auto_kernels

    seen = []
    monkeypatch.setattr(_trials, "run", lambda kernel_class, *args: seen.append(kernel_class)
                        or (torch.zeros(1), torch.zeros(0), torch.zeros(0)))
    rowptr, col = torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)
    x, weights = torch.randn(1, heads, depth), torch.rand(1, heads, 1)
    _auto_kernels.gspmm_auto(rowptr, col, torch.zeros(1, dtype=torch.int32), x, weights,
                           "mul", "sum")
    (kernel_class,) = seen
    assert kernel_class.primitive == "mul_heads" and kernel_class.key().endswith(key)


def test_per_head_calibration_input_has_one_heads_row_of_the_class_width():
    from gnnforge.ops import _calibration_inputs

    for width_class, (heads, depth) in enumerate([(8, 8), (8, 16), (8, 64), (2, 256)]):
        kernel_class = KernelClass("mul_heads", "sum", "float32", "int32", width_class)
        assert _kernel_class.calibration_heads(kernel_class) == heads
        run = _calibration_inputs.runner("numba", kernel_class, _cpu_kernels)
        out, _, _ = run()
        assert out.shape[1:] == (heads, depth)
        nodes, edges = _kernel_class.representative_size(kernel_class)
        assert _kernel_class.representative_work(kernel_class) == edges * heads * depth


class _FakeClocks:
    """perf_counter / process_time for `_calibration`: each call of a fake kernel advances the
    wall clock by its time and the CPU clock by its time x the share it ran."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def advance(self, seconds: float, running_share: float) -> None:
        self.wall += seconds
        self.cpu += seconds * running_share


def _clocked_runners(monkeypatch, plans: dict[str, list[tuple[float, float]]],
                     log: list[str] | None = None):
    """Candidates whose successive calls take (seconds, running share) from `plans`
    (the last entry repeats) on the calibration's injected clock, so the outcome does not
    depend on the machine's load; returns the calls made per candidate (and appends each
    call's name to `log`)."""
    clocks, calls = _FakeClocks(), {name: 0 for name in plans}
    monkeypatch.setattr(_calibration, "clock",
                        _calibration.Clock(wall=lambda: clocks.wall, cpu=lambda: clocks.cpu))

    def runner(name, kernel_class, kernels):
        def run():
            plan = plans[name]
            clocks.advance(*plan[min(calls[name], len(plan) - 1)])
            calls[name] += 1
            if log is not None:
                log.append(name)
        return run

    monkeypatch.setattr("gnnforge.ops._calibration_inputs.runner", runner)
    monkeypatch.setattr(_cpu_kernels, "candidates", lambda kernel_class: list(plans))
    return calls


def test_a_descheduled_call_is_timed_again_and_does_not_decide(fresh_cache, monkeypatch):
    # numba is the faster kernel (1 ms vs 2 ms) but its first timed call ran while the
    # process was off the cores (8 ms wall, 5% CPU); the calibration must time it again.
    plans = {"numba": [(0.001, 1.0), (0.008, 0.05), (0.001, 1.0)],
             "native:sse2": [(0.002, 1.0)]}
    calls = _clocked_runners(monkeypatch, plans)
    assert _calibration.choice(SUM64, _cpu_kernels) == "numba"
    entry = _tuning_record.measured_classes()[SUM64.key()]
    assert entry["min_ms"]["numba"] == pytest.approx(1.0)
    assert entry["median_ms"]["numba"] == pytest.approx(1.0)  # the 8 ms call not kept
    assert entry["descheduled_runs"] == 0
    assert calls["numba"] == 1 + 1 + _calibration._ROUNDS  # warm-up, the retried call, rounds


def test_calls_descheduled_every_time_are_counted_and_named_by_doctor(fresh_cache,
                                                                      monkeypatch):
    plans = {"numba": [(0.008, 0.05)], "native:sse2": [(0.008, 0.05)]}
    calls = _clocked_runners(monkeypatch, plans)
    _calibration.choice(SUM64, _cpu_kernels)
    entry = _tuning_record.measured_classes()[SUM64.key()]
    assert entry["descheduled_runs"] == 2 * _calibration._ROUNDS
    assert calls["numba"] == 1 + _calibration._ROUNDS * (_calibration._RETRIES + 1)
    monkeypatch.undo()  # the real clocks again for doctor
    monkeypatch.setenv("GNNFORGE_CACHE", str(fresh_cache))
    text = gnnforge.doctor()
    assert "measured while other processes had the cores" in text and SUM64.key() in text


def test_tune_force_measures_every_recorded_class_again(fresh_cache, monkeypatch):
    first_use = KernelClass("mul", "sum", "float64", "int64", 1)
    _fake_runners(monkeypatch, {"numba": 0.0005, "native:sse2": 0.001})
    _calibration.choice(first_use, _cpu_kernels)   # measured on first use, not a common class
    assert first_use not in _calibration.common_classes()
    measured: list[KernelClass] = []
    real = _calibration._calibrate
    monkeypatch.setattr(_calibration, "_calibrate",
                        lambda c, kernels: measured.append(c) or real(c, kernels))
    _calibration.tune(_cpu_kernels, classes=None, force=True)
    assert first_use in measured and set(_calibration.common_classes()) <= set(measured)
