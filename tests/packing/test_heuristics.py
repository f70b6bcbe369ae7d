from __future__ import annotations

import numpy as np
import pytest

from gnnforge.packing import check_monotone, pack, weighted_heuristic


def test_user_callable_non_monotone_is_rejected():
    def bumpy(x):
        return np.sin(x[:, 0]) + x[:, 1]

    with pytest.raises(ValueError, match="not monotone"):
        pack({(1, 1): 3}, (10, 10), heuristic=bumpy)


def test_decreasing_in_one_component_is_rejected():
    with pytest.raises(ValueError, match=r"not monotone: h\("):
        check_monotone(lambda x: x[:, 0] - 0.001 * x[:, 1], np.array([5, 5]))


def test_wrong_shape_and_non_finite_are_rejected():
    with pytest.raises(ValueError, match="must map"):
        check_monotone(lambda x: x, np.array([3, 3]))
    with pytest.raises(ValueError, match="non-finite"), np.errstate(divide="ignore"):
        check_monotone(lambda x: np.log(x[:, 0]), np.array([3, 3]))


def test_monotone_user_callable_is_accepted_on_large_grid():
    plan = pack({(3, 7): 5, (100, 4000): 1}, (1000, 5000),
                heuristic=lambda x: x[:, 0] + np.sqrt(x[:, 1]))
    assert plan.num_graphs == 6


def test_weighted_heuristics():
    for kind in ("sum", "product", "max", "min"):
        plan = pack({(3, 7): 5, (1, 2): 9}, (10, 20), heuristic=weighted_heuristic(kind, [1, 2]))
        assert plan.num_graphs == 14
    with pytest.raises(ValueError, match="non-negative"):
        weighted_heuristic("sum", [1, -1])
    with pytest.raises(ValueError, match="kind"):
        weighted_heuristic("median", [1, 1])


def test_unknown_heuristic_name():
    with pytest.raises(ValueError, match="heuristic"):
        pack({(1, 1): 1}, (2, 2), heuristic="area")
