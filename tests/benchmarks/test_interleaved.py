"""benchmarks/_interleaved.py: rounds, order and the min_seconds extension."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _interleaved import interleaved_median_ms  # noqa: E402


def _counting(calls: dict[str, int], name: str, seconds: float = 0.0):
    def call():
        calls[name] += 1
        if seconds:
            time.sleep(seconds)
    return call


def test_without_min_seconds_every_method_runs_warmup_plus_two_calls_per_round():
    calls = {"a": 0, "b": 0}
    out = interleaved_median_ms({n: _counting(calls, n) for n in calls}, repeats=5)
    assert set(out) == {"a", "b"}
    assert calls == {"a": 11, "b": 11}  # 1 warm-up + 5 rounds x (untimed + timed)


def test_cheap_cells_get_more_rounds_up_to_the_cap_and_an_odd_count():
    calls = {"a": 0}
    interleaved_median_ms({"a": _counting(calls, "a")}, repeats=5, min_seconds=10.0,
                          max_rounds=20)
    rounds = (calls["a"] - 1) // 2
    assert rounds == 19  # capped at 20, made odd downwards


def test_expensive_cells_keep_the_requested_rounds():
    calls = {"a": 0}
    interleaved_median_ms({"a": _counting(calls, "a", seconds=0.01)}, repeats=5,
                          min_seconds=0.01)
    assert (calls["a"] - 1) // 2 == 5


def test_rounds_extend_to_roughly_min_seconds_of_timed_calls():
    calls = {"a": 0}
    interleaved_median_ms({"a": _counting(calls, "a", seconds=0.002)}, repeats=3,
                          min_seconds=0.05)
    rounds = (calls["a"] - 1) // 2
    assert 15 <= rounds <= 31 and rounds % 2 == 1


def test_the_median_is_the_middle_timed_call(monkeypatch):
    import _interleaved

    durations = iter([0.001, 0.009, 0.003, 0.005, 0.007])  # seconds, one per timed call
    clock = {"now": 0.0, "started": False}

    def fake_perf_counter():
        if clock["started"]:  # the stop of a timed call
            clock["now"] += next(durations)
        clock["started"] = not clock["started"]
        return clock["now"]

    monkeypatch.setattr(_interleaved.time, "perf_counter", fake_perf_counter)
    out = interleaved_median_ms({"a": lambda: None}, repeats=5)
    assert abs(out["a"] - 5.0) < 1e-9
