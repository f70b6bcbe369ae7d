"""The measured selection's bookkeeping (`Race`) and the doubt rule (`in_doubt`), with
synthetic timings: which calls run, when a candidate is dropped, the winner, the cost."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.plan._decide import in_doubt
from gnnforge.plan._race import Race


def _run(race: Race, seconds: dict[str, float], limit: int = 100) -> list[str]:
    """Drive a race with fixed per-plan seconds; returns the plan of every call."""
    order = []
    for _ in range(limit):
        plan, timed = race.next_call()
        order.append(plan)
        if race.done and not timed:
            break
        if timed:
            race.record(plan, seconds[plan])
    return order


def test_race_warms_up_then_times_and_locks_in_the_fastest():
    race = Race(["a", "b"], samples=3, budget=1.0)
    order = _run(race, {"a": 1.0, "b": 1.05})
    assert order[:3] == ["a", "a", "b"]  # a untimed, a timed, then b's untimed first run
    assert race.winner == "a"
    assert len(race.times[0]) == 3 and len(race.times[1]) == 3
    # four runs of b (one untimed), each 0.05 slower than a: the race's whole cost
    assert race.overhead_s() == pytest.approx(0.2)


def test_a_clearly_slower_candidate_is_dropped_after_one_run():
    race = Race(["a", "b"], samples=3, budget=1.0)
    _run(race, {"a": 1.0, "b": 4.5})
    assert race.winner == "a" and len(race.times[1]) == 1
    assert race.overhead_s() == pytest.approx(7.0)  # its untimed and its timed run


def test_a_candidate_predicted_far_slower_never_runs():
    # the default predicted (and really) 60x slower: its one first run alone would pass
    # the budget (2 runs' worth), so it is dropped unrun
    race = Race(["best", "default"], samples=3, budget=0.02, horizon=100,
                predicted=[1.0, 60.0])
    order = _run(race, {"best": 1.0, "default": 60.0})
    assert "default" not in order and race.winner == "best"
    assert race.overhead_s() == 0.0


def test_the_predicted_best_loses_to_a_faster_candidate():
    race = Race(["a", "b", "c"], samples=2, budget=1.0)
    _run(race, {"a": 1.0, "b": 0.5, "c": 0.7})
    assert race.winner == "b"


def test_the_budget_bounds_the_cost():
    # 2% of 100 runs of the best = 2 runs' worth; b costs 0.9 extra per run
    race = Race(["a", "b"], samples=10, budget=0.02, horizon=100)
    _run(race, {"a": 1.0, "b": 1.9})
    assert race.winner == "a"
    assert race.overhead_s() <= 0.02 * 100 * 1.0 + 1e-9


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=4), st.integers(1, 5),
       st.floats(0.0, 0.1))
def test_any_race_ends_with_the_fastest_remaining_and_within_budget(speeds, samples, budget):
    plans = [f"p{i}" for i in range(len(speeds))]
    race = Race(plans, samples=samples, budget=budget, horizon=100)
    order = _run(race, dict(zip(plans, speeds)))
    assert race.done and order[-1] == race.winner
    best = min(speeds)
    # the winner is never worse than the dropping rule allows
    assert speeds[plans.index(race.winner)] <= 4.0 * best + 1e-12
    # a call is made only while its expected cost fits the budget; unknown in advance:
    # each candidate's untimed first run and its first timed run
    unknown = 2 * sum(s - best for s in speeds)
    assert race.overhead_s() <= budget * 100 * best + unknown + 1e-9


def test_race_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one plan"):
        Race([])
    with pytest.raises(ValueError, match="samples"):
        Race(["a"], samples=0)


def test_in_doubt_keeps_only_candidates_the_errors_allow():
    # candidate 1 predicted 2x faster with a small spread: nothing else can win
    assert in_doubt([2.0, 1.0, 1.9], [0.0, 0.05, 0.05], caution=1.5) == [1]
    # candidate 1 predicted 10% faster with a wide spread: the default may still win
    assert in_doubt([1.1, 1.0], [0.0, 0.3], caution=1.5) == [1, 0]
    # caution 0: only the cheapest prediction survives (ties aside)
    assert in_doubt([1.0, 1.2, 0.9], [0.0, 0.5, 0.5], caution=0.0) == [2]
    with pytest.raises(ValueError, match="one spread per cost"):
        in_doubt([1.0, 2.0], [0.0], caution=1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 10), st.floats(0, 1)), min_size=1, max_size=5),
       st.floats(0, 3))
def test_in_doubt_always_keeps_the_best_lower_bound(entries, caution):
    costs = [c for c, _ in entries]
    spreads = [0.0] + [s for _, s in entries[1:]]
    alive = in_doubt(costs, spreads, caution)
    bounds = [math.log(costs[0] / c) - caution * s for c, s in zip(costs, spreads)]
    assert max(range(len(costs)), key=bounds.__getitem__) in alive or \
        any(abs(bounds[j] - max(bounds)) < 1e-9 for j in alive)
