"""Monotone heuristics that order size tuples and remaining spaces.

Tuple packing reduces a k-dimensional size to one priority. Items are packed in
descending priority and a pack's remaining space is ranked by the same function, so it
must be monotone: growing any component never lowers the value. Otherwise "the fullest
pack that fits" is ill defined and the best-fit search below may skip the right pack.

Built-in heuristics see each component divided by its limit, so nodes and edges weigh
the same whatever their scale; user callables see raw sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["HEURISTICS", "check_monotone", "resolve_heuristic", "weighted_heuristic"]

Heuristic = Callable[[np.ndarray], np.ndarray]  # [n, k] sizes -> [n] priorities

HEURISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "product": lambda x: np.prod(x, axis=1),
    "sum": lambda x: np.sum(x, axis=1),
    "max": lambda x: np.max(x, axis=1),
    "min": lambda x: np.min(x, axis=1),
    "nodes": lambda x: x[:, 0],
    "edges": lambda x: x[:, 1],
}

# Scalar twins of HEURISTICS on one scaled tuple: the packing loop ranks one new pack at a
# time, where numpy's per-call overhead would cost more than the arithmetic.
_SCALAR: dict[str, Callable[[tuple[float, ...]], float]] = {
    "product": math.prod,
    "sum": sum,
    "max": max,
    "min": min,
    "nodes": lambda v: v[0],
    "edges": lambda v: v[1],
}

_MAX_GRID_POINTS = 2_000_000


def weighted_heuristic(kind: str, weights: Sequence[float]) -> Heuristic:
    """A built-in heuristic with per-component weights (applied after the limit scaling).

    'sum': sum_k w_k x_k; 'product': prod_k x_k ** w_k; 'max': max_k w_k x_k; 'min':
    min_k w_k x_k. Weights must be non-negative, which keeps the result monotone.

    Raises:
        ValueError: on an unknown kind or a negative weight.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or (w < 0).any():
        raise ValueError(f"weighted_heuristic: weights must be a 1-D list of non-negative "
                         f"numbers, got {weights!r}")
    table = {
        "sum": lambda x: x @ w,
        "product": lambda x: np.prod(np.power(x, w), axis=1),
        "max": lambda x: np.max(x * w, axis=1),
        "min": lambda x: np.min(x * w, axis=1),
    }
    if kind not in table:
        raise ValueError(f"weighted_heuristic: kind must be one of {sorted(table)}, got {kind!r}")
    function = table[kind]
    function.__name__ = f"weighted_{kind}{tuple(w.tolist())}"
    function._gnnforge_scaled = True  # type: ignore[attr-defined]
    return function


def resolve_heuristic(heuristic: str | Heuristic, limits: np.ndarray) -> tuple[str, Heuristic]:
    """(name, vectorised function on raw [n, k] sizes) for a name or callable.

    Built-ins and `weighted_heuristic` results are scaled by `limits`; a user callable is
    used as given after `check_monotone` on the grid [0, limits].

    Raises:
        ValueError: on an unknown name, a projection onto a missing component, or a
            callable that is not monotone on the grid.
    """
    k = limits.size
    scale = np.maximum(limits, 1).astype(np.float64)
    if isinstance(heuristic, str):
        if heuristic not in HEURISTICS:
            raise ValueError(f"heuristic: expected one of {sorted(HEURISTICS)} or a callable, "
                             f"got {heuristic!r}")
        if heuristic == "edges" and k < 2:
            raise ValueError("heuristic 'edges' needs sizes with at least 2 components")
        base, scalar = HEURISTICS[heuristic], _SCALAR[heuristic]
        inverse = tuple(1.0 / float(v) for v in scale)
        function: Heuristic = lambda x: base(x / scale)
        function.scalar = (  # type: ignore[attr-defined]
            lambda r: float(scalar([a * b for a, b in zip(r, inverse)])))
        return heuristic, function
    if not callable(heuristic):
        raise TypeError(f"heuristic: expected a name or a callable, got {type(heuristic).__name__}")
    name = getattr(heuristic, "__name__", type(heuristic).__name__)
    if getattr(heuristic, "_gnnforge_scaled", False):
        user = heuristic
        scaled: Heuristic = lambda x: user(x / scale)
        check_monotone(scaled, limits, name)
        return name, scaled
    check_monotone(heuristic, limits, name)
    return name, heuristic


def _grid_axes(limits: np.ndarray) -> list[np.ndarray]:
    # The full grid when it is small enough; otherwise an even subsample of each axis that
    # keeps both ends (monotonicity is checked between neighbours of this grid).
    per_axis = max(2, int(_MAX_GRID_POINTS ** (1 / max(limits.size, 1))))
    axes = []
    for limit in limits.tolist():
        if limit + 1 <= per_axis:
            axes.append(np.arange(limit + 1))
        else:
            axes.append(np.unique(np.linspace(0, limit, per_axis).round().astype(np.int64)))
    return axes


def check_monotone(function: Heuristic, limits: np.ndarray, name: str = "heuristic") -> None:
    """Raise unless `function` is non-decreasing in every component on the grid [0, limits].

    The grid is every integer tuple up to `limits` when that has at most 2M points, else
    an even subsample per axis (ends included).

    Raises:
        ValueError: naming the first pair of neighbouring tuples where the value drops, or
            when the callable does not return one finite number per row.
    """
    axes = _grid_axes(np.asarray(limits, dtype=np.int64))
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    points = mesh.reshape(-1, len(axes)).astype(np.float64)
    values = np.asarray(function(points), dtype=np.float64)
    if values.shape != (points.shape[0],):
        raise ValueError(f"heuristic {name}: must map an [n, k] array to [n] values, got shape "
                         f"{values.shape} for input {points.shape}")
    if not np.isfinite(values).all():
        bad = int(np.argwhere(~np.isfinite(values))[0, 0])
        where = points[bad].astype(int).tolist()
        raise ValueError(f"heuristic {name}: non-finite value at {where}")
    grid = values.reshape(mesh.shape[:-1])
    for axis in range(grid.ndim):
        drops = np.diff(grid, axis=axis) < -1e-12 * np.maximum(1.0, np.abs(grid).max())
        if drops.any():
            where = np.argwhere(drops)[0]
            low = [int(axes[a][i]) for a, i in enumerate(where)]
            high = list(low)
            high[axis] = int(axes[axis][where[axis] + 1])
            raise ValueError(
                f"heuristic {name} is not monotone: h({low}) = {grid[tuple(where)]:.6g} > "
                f"h({high}) = {grid[tuple(where + np.eye(grid.ndim, dtype=int)[axis])]:.6g}; "
                "packing needs a heuristic that never decreases when a size grows")
