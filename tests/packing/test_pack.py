"""Invariants of every packing method on random histograms, plus known answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnforge.packing import lower_bound, pack, size_histogram
from gnnforge.packing._tuple_pack import _find

FULL_METHODS = ["lpfhp", "spfhp", "none"]
HEURISTICS = ["product", "sum", "max", "min", "nodes", "edges"]


@st.composite
def histograms(draw, k=2):
    limits = tuple(draw(st.integers(1, 40)) for _ in range(k))
    n = draw(st.integers(1, 60))
    rows = [tuple(draw(st.integers(0, lim)) for lim in limits) for _ in range(n)]
    return size_histogram(np.array(rows).reshape(n, k)), limits


def _check_plan(plan, histogram, limits, cap):
    packed = {}
    for shape, count in plan.packs:
        assert count >= 1 and len(shape) >= 1
        total = np.sum(np.array(shape).reshape(len(shape), -1), axis=0)
        assert (total <= np.array(limits)).all(), (shape, limits)
        if cap is not None:
            assert len(shape) <= cap
        for size in shape:
            packed[size] = packed.get(size, 0) + count
    assert packed == histogram  # every item packed exactly once
    assert plan.num_packs == sum(count for _, count in plan.packs)
    assert plan.lower_bound <= plan.num_packs
    assert max(plan.lower_bound, plan.large_item_bound) <= plan.num_packs
    assert all(0 <= e <= 1 + 1e-12 for e in plan.efficiency)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=histograms(), method=st.sampled_from(FULL_METHODS),
       heuristic=st.sampled_from(HEURISTICS), cap=st.one_of(st.none(), st.integers(1, 5)),
       improve=st.booleans())
def test_every_pack_respects_limits_and_conserves_counts(data, method, heuristic, cap, improve):
    histogram, limits = data
    plan = pack(histogram, limits, heuristic, method, cap, improve=improve)
    _check_plan(plan, histogram, limits, cap)


@settings(max_examples=25, deadline=None)
@given(data=histograms(k=3), method=st.sampled_from(["lpfhp", "spfhp"]),
       cap=st.one_of(st.none(), st.integers(1, 4)))
def test_three_components(data, method, cap):
    histogram, limits = data
    plan = pack(histogram, limits, "product", method, cap)
    _check_plan(plan, histogram, limits, cap)


@settings(max_examples=40, deadline=None)
@given(data=histograms(), component=st.sampled_from(["nodes_only", "edges_only"]))
def test_single_component_baselines_report_overflow(data, component):
    histogram, limits = data
    plan = pack(histogram, limits, method=component)
    j = 0 if component == "nodes_only" else 1
    other = 1 - j
    worst = 0
    packed = 0
    for shape, count in plan.packs:
        total = np.sum(np.array(shape), axis=0)
        assert total[j] <= limits[j]
        worst = max(worst, int(total[other]) - limits[other])
        packed += len(shape) * count
    assert packed == sum(histogram.values())
    assert plan.overflow[other][1] == max(worst, 0)
    assert plan.overflow[j] == (0, 0, 0)


def test_find_kernel_equals_numpy_reference():
    rng = np.random.default_rng(3)
    for _ in range(200):
        g, k = int(rng.integers(0, 30)), int(rng.integers(1, 4))
        remaining = rng.integers(0, 10, (g + 5, k))
        priority = rng.random(g + 5).round(1)  # ties happen
        size = rng.integers(0, 10, k)
        for best_fit in (True, False):
            fits = np.flatnonzero((remaining[:g] >= size).all(axis=1))
            got = _find(remaining, priority, g, size, best_fit)
            if fits.size == 0:
                assert got == -1
            else:
                values = priority[fits]
                expected = values.min() if best_fit else values.max()
                assert got in fits and priority[got] == expected


def test_known_answer_pairs_complement():
    # (3, 5) + (1, 1) fill (4, 6) exactly; LPFHP must find the 2 perfect packs.
    plan = pack({(3, 5): 2, (1, 1): 2}, (4, 6), improve=False)
    assert plan.num_packs == 2
    assert sorted(map(sorted, (s for s, _ in plan.packs))) == [[(1, 1), (3, 5)]]
    assert plan.efficiency == (1.0, 1.0) and plan.gap == 0.0


def test_new_packs_take_as_many_copies_as_fit():
    plan = pack({(2, 2): 10}, (6, 100), improve=False)
    assert plan.num_packs == 4  # 3 + 3 + 3 + 1
    assert plan.lower_bound == 4


def test_max_graphs_per_pack_is_a_bound():
    plan = pack({(1, 0): 10}, (100, 100), max_graphs_per_pack=3)
    assert plan.num_packs == 4 == plan.lower_bound


def test_none_is_one_graph_per_pack():
    plan = pack({(2, 3): 4, (5, 1): 1}, (5, 3), method="none")
    assert plan.num_packs == 5 and plan.speedup == 1.0


def test_lower_bound_formula():
    assert lower_bound(np.array([10, 7]), np.array([4, 7]), 3, None) == 3
    assert lower_bound(np.array([10, 7]), np.array([4, 7]), 30, 5) == 6


def test_oversized_error_and_drop():
    with pytest.raises(ValueError, match=r"size \[9, 1\]"):
        pack({(9, 1): 2, (1, 1): 3}, (5, 5))
    plan = pack({(9, 1): 2, (1, 1): 3}, (5, 5), oversized="drop")
    assert plan.dropped == {(9, 1): 2} and plan.num_dropped == 2 and plan.num_graphs == 3


def test_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        pack({(1, 1): 1}, (2, 2), method="best")
    with pytest.raises(ValueError, match="limits"):
        pack({(1, 1): 1}, (2,))
    with pytest.raises(ValueError, match="counts must be positive"):
        pack({(1, 1): 0}, (2, 2))
    with pytest.raises(ValueError, match="max_graphs_per_pack"):
        pack({(1, 1): 1}, (2, 2), max_graphs_per_pack=0)
    with pytest.raises(TypeError, match="histogram"):
        pack([(1, 1)], (2, 2))


def test_empty_histogram():
    plan = pack({}, (3, 3))
    assert plan.num_packs == 0 and plan.packs == []


def test_size_histogram_counts():
    sizes = np.array([[1, 2], [1, 2], [3, 0], [0, 0]])
    assert size_histogram(sizes) == {(0, 0): 1, (1, 2): 2, (3, 0): 1}
    assert size_histogram(np.array([4, 4, 1])) == {(1,): 1, (4,): 2}
    with pytest.raises(ValueError, match="negative"):
        size_histogram(np.array([[1, -1]]))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 900)), min_size=1, max_size=80))
def test_size_histogram_equals_counter(rows):
    from collections import Counter

    assert size_histogram(np.array(rows)) == dict(Counter(rows))


def test_improvement_never_worse():
    rng = np.random.default_rng(0)
    sizes = np.stack([rng.integers(5, 60, 3000), rng.integers(5, 130, 3000)], axis=1)
    histogram = size_histogram(sizes)
    plain = pack(histogram, (120, 260), improve=False)
    improved = pack(histogram, (120, 260), improve=True)
    assert improved.num_packs <= plain.num_packs
    assert improved.improved_from == plain.num_packs


def _random_histogram(graphs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return size_histogram(np.stack([rng.integers(1, 60, graphs), rng.integers(1, 150, graphs)],
                                   axis=1))


def test_improvement_budget_is_work_not_time():
    from gnnforge.packing._improve import improve_packing
    from gnnforge.packing._tuple_pack import PackWork, histogram_pack

    histogram = _random_histogram(3000)
    bins, counts = np.array(list(histogram), dtype=np.int64), np.array(list(histogram.values()))
    limits = np.array([300, 700])
    work = PackWork()
    plain = histogram_pack(bins, counts, limits, lambda x: x[:, 0] * x[:, 1], True, None,
                           work=work)
    assert work.units > 0
    # A budget below one attempt: exactly the first attempt runs, every time.
    one = [improve_packing(plain, bins, counts, limits, [lambda x: x[:, 0] * x[:, 1]], None,
                           budget=1) for _ in range(2)]
    every = improve_packing(plain, bins, counts, limits, [lambda x: x[:, 0] * x[:, 1]], None)
    assert one[0] == one[1]
    count = lambda shapes: sum(c for _, c in shapes)  # noqa: E731
    assert count(every) <= count(one[0]) <= count(plain)


def test_default_improvement_is_reproducible_and_bounded_by_every_attempt():
    histogram = _random_histogram(4000, seed=3)
    default = [pack(histogram, (300, 700)) for _ in range(2)]
    assert default[0].packs == default[1].packs
    every = pack(histogram, (300, 700), improve=float("inf"))
    plain = pack(histogram, (300, 700), improve=False)
    assert every.num_packs <= default[0].num_packs <= plain.num_packs


@pytest.mark.parametrize("bad", [-1, "yes", float("nan")])
def test_bad_improve_budget_is_named(bad):
    with pytest.raises(ValueError, match="improve"):
        pack({(1, 1): 3}, (4, 4), improve=bad)
