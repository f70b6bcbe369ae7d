"""LP refinement: the column-generation bound is valid, refinement only removes packs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gnnforge.packing import pack, size_histogram
from gnnforge.packing._column_generation import column_generation, simple_bound
from gnnforge.packing._histogram import histogram_arrays
from gnnforge.packing._knapsack import knapsack_dp, knapsack_milp
from gnnforge.packing._local_search import _PairRepacker, remove_packs
from gnnforge.packing._refine import patterns_to_shapes

from .test_pack import _check_plan, histograms


def _brute_force_packs(items: np.ndarray, limits: np.ndarray, cap: int | None) -> int:
    """Fewest packs by dynamic programming over subsets (items [n, k], n <= 8)."""
    n = items.shape[0]
    fits = np.zeros(1 << n, dtype=bool)
    for mask in range(1, 1 << n):
        chosen = [i for i in range(n) if mask >> i & 1]
        fits[mask] = ((items[chosen].sum(axis=0) <= limits).all()
                      and (cap is None or len(chosen) <= cap))
    best = np.zeros(1 << n, dtype=np.int64)
    for mask in range(1, 1 << n):
        low = mask & -mask  # the lowest item goes into some pack: enumerate that pack
        rest, sub, value = mask ^ low, mask ^ low, n + 1
        while True:
            if fits[sub | low]:
                value = min(value, 1 + best[mask ^ (sub | low)])
            if sub == 0:
                break
            sub = (sub - 1) & rest
        best[mask] = value
    return int(best[-1])


@st.composite
def tiny_instances(draw):
    k = draw(st.integers(1, 3))
    limits = np.array([draw(st.integers(1, 12)) for _ in range(k)])
    n = draw(st.integers(1, 8))
    items = np.array([[draw(st.integers(0, int(lim))) for lim in limits] for _ in range(n)])
    cap = draw(st.one_of(st.none(), st.integers(1, 4)))
    return items.reshape(n, k), limits, cap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=tiny_instances())
def test_lp_bound_is_valid_and_at_least_the_simple_bounds(instance):
    items, limits, cap = instance
    bins, counts = histogram_arrays(size_histogram(items))
    master = column_generation(bins, counts, limits, cap,
                               np.zeros((0, counts.size), np.int64), time_limit=30.0)
    optimum = _brute_force_packs(items, limits, cap)
    assert simple_bound(bins, counts, limits, cap) <= master.result.bound <= optimum
    assert master.result.lp_lower <= master.result.lp_value + 1e-6
    assert master.result.converged


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=tiny_instances(), method=st.sampled_from(["lpfhp", "spfhp"]))
def test_refine_never_adds_packs_and_keeps_plans_valid(instance, method):
    items, limits, cap = instance
    histogram = size_histogram(items)
    limits = tuple(int(v) for v in limits)
    plain = pack(histogram, limits, method=method, max_graphs_per_pack=cap)
    refined = pack(histogram, limits, method=method, max_graphs_per_pack=cap, refine=10.0)
    _check_plan(refined, histogram, limits, cap)
    assert refined.num_packs <= plain.num_packs
    assert refined.lp is not None
    assert max(refined.lower_bound, refined.large_item_bound) <= refined.lp_bound
    assert refined.lp_bound <= _brute_force_packs(items, np.array(limits), cap)
    assert refined.lp_bound <= refined.proven_bound <= refined.num_packs
    assert refined.best_gap >= 0
    if refined.best_gap == 0:
        assert refined.lp.converged  # a plan at the bound makes the bound final


def test_refine_finds_the_optimum_the_heuristics_miss():
    # Found by random search against the brute force: LPFHP + improvement step need 5
    # packs, 4 is optimal and the LP proves it.
    items = np.array([[6, 6], [2, 4], [2, 2], [7, 1], [3, 4], [5, 4], [4, 7], [2, 6], [6, 8]])
    histogram = size_histogram(items)
    assert _brute_force_packs(items, np.array([10, 12]), None) == 4
    assert pack(histogram, (10, 12)).num_packs == 5
    plan = pack(histogram, (10, 12), refine=10.0)
    _check_plan(plan, histogram, (10, 12), None)
    assert plan.num_packs == plan.lp_bound == 4 and plan.best_gap == 0
    assert plan.improved_from == 5


def test_lp_bound_beats_the_simple_bounds():
    # Five items of 4 in packs of 10: totals say 2 packs, no item is above half, but only
    # two fit a pack, so 3 are needed; the LP is 2.5.
    plan = pack({(4, 1): 5}, (10, 10), refine=10.0)
    assert (plan.lower_bound, plan.large_item_bound) == (2, 0)
    assert plan.lp_bound == 3 == plan.num_packs
    assert plan.lp.lp_value == pytest.approx(2.5)
    assert "LP bound 3" in plan.summary()


@pytest.mark.parametrize("histogram, limits, cap, packs", [
    ({}, (5, 5), None, 0),
    ({(0, 0): 7}, (5, 5), None, 1),       # empty graphs: one pack holds all of them
    ({(0, 0): 7}, (5, 5), 3, 3),          # ... unless the graph cap splits them
    ({(5, 5): 3}, (5, 5), None, 3),       # every graph fills a pack
    ({(2,): 4, (3,): 2}, (6,), 2, 3),     # one component, graph cap binding
    ({(1, 2, 3): 4}, (2, 4, 6), None, 2),  # three components
])
def test_degenerate_histograms(histogram, limits, cap, packs):
    plan = pack(histogram, limits, max_graphs_per_pack=cap, refine=5.0)
    _check_plan(plan, histogram, limits, cap)
    assert plan.num_packs == packs
    if histogram:
        assert plan.lp_bound == packs


def test_patterns_to_shapes_drops_surplus_and_conserves_items():
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(1, 5, size=6)
        patterns = rng.integers(0, 3, size=(8, 6))
        multiplicity = rng.integers(0, 4, size=8)
        shapes, remaining = patterns_to_shapes(patterns, multiplicity, counts)
        placed = np.zeros(6, dtype=np.int64)
        for content, count in shapes:
            used = np.bincount(np.asarray(content, dtype=np.int64), minlength=6)
            assert count >= 1 and used.any()
            assert any((used <= p).all() for p in patterns)  # a sub-pattern of some pattern
            placed += count * used
        assert (placed + remaining == counts).all() and (remaining >= 0).all()
        assert sum(c for _, c in shapes) <= multiplicity.sum()


def test_refine_rejects_a_negative_budget():
    with pytest.raises(ValueError, match="refine"):
        pack({(1, 1): 2}, (2, 2), refine=-1)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=tiny_instances(), seed=st.integers(0, 2**31 - 1))
def test_knapsack_dp_equals_milp(instance, seed):
    items, limits, _ = instance
    bins, counts = histogram_arrays(size_histogram(items))
    rng = np.random.default_rng(seed)
    pi = rng.random(counts.size) * (rng.random(counts.size) < 0.8)  # some duals zero
    solved = knapsack_dp(bins, counts, limits, pi)
    assert solved is not None
    pattern, value = solved
    reference, upper = knapsack_milp(bins, counts, limits, None, pi, 10.0)
    assert value == pytest.approx(float(pi @ reference), abs=1e-9)
    assert value == pytest.approx(float(pi @ pattern), abs=1e-9) and value <= upper + 1e-9
    assert (pattern >= 0).all() and (pattern <= counts).all()
    assert (pattern @ bins <= limits).all()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=histograms(), cap=st.one_of(st.none(), st.integers(1, 6)), seed=st.integers(0, 9))
def test_local_search_keeps_plans_valid_and_never_adds_packs(data, cap, seed):
    histogram, limits = data
    plan = pack(histogram, limits, max_graphs_per_pack=cap, improve=False)
    bins, counts = histogram_arrays(histogram)
    index = {size: i for i, size in enumerate(histogram)}
    shapes = [(tuple(index[size] for size in content), count) for content, count in plan.packs]
    result = remove_packs(shapes, bins, np.array(limits), cap, 1, 0.3, seed=seed)
    assert sum(count for _, count in result) <= plan.num_packs
    placed = np.zeros(counts.size, dtype=np.int64)
    for content, count in result:
        assert (bins[list(content)].sum(axis=0) <= np.array(limits)).all()
        assert cap is None or len(content) <= cap
        np.add.at(placed, list(content), count)
    assert (placed == counts).all()


@settings(max_examples=40, deadline=None)
@given(instance=tiny_instances())
# Two empty items, one item per pack: the subset sums cannot tell them apart (found by
# hypothesis; the split used to return None).
@example(instance=(np.array([[0], [0]]), np.array([1]), 1))
@example(instance=(np.array([[0], [2], [0], [1]]), np.array([2]), 2))
def test_pair_split_finds_a_two_pack_split_when_one_exists(instance):
    items, limits, cap = instance
    cap = cap or items.shape[0]
    exists = _brute_force_packs(items, limits, cap) <= 2
    result = _PairRepacker(limits).split(items, cap)
    if result is None:
        assert not exists
        return
    over, side = result
    assert (over == 0) == exists
    for part in (items[side], items[~side]):
        assert part.shape[0] <= cap
    assert (items[side].sum(axis=0) <= limits).all()  # one side always fits
