"""K-fold cross-validation splits for graph classification (the GIN paper's protocol).

The graphs of each class are shuffled and dealt round-robin into K folds (stratified, as
scikit-learn's StratifiedKFold is), so every fold has about the same class mix. Seed s
picks the fold: fold s mod K is the test set, fold s + 1 mod K the validation set (model
selection and early stopping), the other K - 2 folds train. The deal itself is drawn from
s // K, so seeds 0..K-1 run the K folds of one partition. Without a validation fold
(`--selection fold-mean`, Xu et al.'s protocol) the K - 1 folds other than the test fold
train.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["fold_indices"]


def fold_indices(labels: Tensor, folds: int, seed: int,
                 validation: bool = True) -> dict[str, list[int]]:
    """Train/val/test graph indices of fold `seed % folds`.

    Args:
        labels: [G] int64, one class per graph.
        folds: K >= 3 (test, validation and at least one training fold).
        seed: picks the fold (seed % K) and the partition (seed // K).
        validation: hold out fold seed + 1 as the validation set; False: it trains and
            "val" is empty.

    Raises:
        ValueError: K < 3 or more folds than graphs.
    """
    count = labels.numel()
    if folds < 3 or folds > count:
        raise ValueError(f"--folds must lie in [3, number of graphs = {count}], got {folds}")
    generator = torch.Generator().manual_seed(seed // folds)
    fold_of = torch.empty(count, dtype=torch.int64)
    dealt = 0
    for label in torch.unique(labels).tolist():
        members = torch.nonzero(labels == label).flatten()
        members = members[torch.randperm(members.numel(), generator=generator)]
        # Continue the round-robin across classes, so small classes do not all start at 0.
        fold_of[members] = (torch.arange(members.numel()) + dealt) % folds
        dealt += members.numel()
    test, val = seed % folds, (seed + 1) % folds
    if not validation:
        return {"train": _where(fold_of != test), "val": [], "test": _where(fold_of == test)}
    return {"train": _where((fold_of != test) & (fold_of != val)),
            "val": _where(fold_of == val), "test": _where(fold_of == test)}


def _where(mask: Tensor) -> list[int]:
    return torch.nonzero(mask).flatten().tolist()
