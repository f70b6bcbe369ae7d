"""Model selection over cross-validation folds from per-epoch test accuracies.

Xu et al. ("How Powerful are Graph Neural Networks?", ICLR 2019, section 7) report, for
10-fold cross-validation, "the average and standard deviation of validation accuracies
across the 10 folds within the cross-validation", at the single epoch whose accuracy
averaged over the folds is best. Their "validation" folds are the test folds (no other
data is held out), so the number picks its epoch on the data it reports: optimistic, as
later work (Errica et al., ICLR 2020) measured. `fold_mean` computes it; `last_epoch` is
the honest alternative: the accuracy after the last epoch, no selection at all.

Each fold's curve is its test accuracy after every epoch, in percent. No torch here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Selected", "fold_mean", "last_epoch"]


@dataclass(frozen=True)
class Selected:
    """One accuracy per fold at one epoch (1-based), their mean and sample std."""

    epoch: int
    values: tuple[float, ...]
    mean: float
    std: float


def _at(curves: Sequence[Sequence[float]], epoch: int) -> Selected:
    values = tuple(float(curve[epoch - 1]) for curve in curves)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Selected(epoch, values, statistics.mean(values), std)


def _check(curves: Sequence[Sequence[float]]) -> int:
    """The common curve length; ValueError naming the fold that differs."""
    if not curves:
        raise ValueError("fold-mean selection needs at least one fold's curve, got none")
    length = len(curves[0])
    for fold, curve in enumerate(curves):
        if len(curve) != length or not curve:
            raise ValueError(f"fold-mean selection: every fold needs one test accuracy per "
                             f"epoch and the same number of epochs; fold {fold} has "
                             f"{len(curve)}, fold 0 has {length} (a run stopped early?)")
    return length


def fold_mean(curves: Sequence[Sequence[float]]) -> Selected:
    """The epoch whose test accuracy averaged over the folds is highest (the first such
    epoch on ties), and the folds' accuracies there.

    Raises:
        ValueError: no curves, or curves of different lengths.
    """
    length = _check(curves)
    means = [statistics.mean(float(curve[e]) for curve in curves) for e in range(length)]
    best = max(range(length), key=lambda e: (means[e], -e))
    return _at(curves, best + 1)


def last_epoch(curves: Sequence[Sequence[float]]) -> Selected:
    """Every fold's test accuracy after its last epoch.

    Raises:
        ValueError: no curves, or curves of different lengths.
    """
    return _at(curves, _check(curves))
