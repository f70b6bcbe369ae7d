"""K-fold cross-validation splits: the folds partition the graphs, keep the class mix,
and seeds 0..K-1 test each fold once."""

from __future__ import annotations

import pytest
import torch

from gnnforge.train import ConfigError, load_config
from gnnforge.train._folds import fold_indices


def test_seeds_test_every_fold_once_and_keep_the_class_mix():
    labels = torch.tensor([0] * 30 + [1] * 12 + [2] * 5)
    tested = []
    for seed in range(5):
        split = fold_indices(labels, 5, seed)
        everything = split["train"] + split["val"] + split["test"]
        assert sorted(everything) == list(range(labels.numel()))       # a partition
        assert set(split["val"]) == set(fold_indices(labels, 5, (seed + 1) % 5)["test"])
        counts = torch.bincount(labels[split["test"]], minlength=3)
        assert counts[0] == 6 and counts[1] in (2, 3) and counts[2] <= 2   # stratified
        tested += split["test"]
    assert sorted(tested) == list(range(labels.numel()))
    # Seeds K..2K-1 deal another partition; the same seed always the same one.
    assert fold_indices(labels, 5, 5)["test"] != fold_indices(labels, 5, 0)["test"]
    assert fold_indices(labels, 5, 3) == fold_indices(labels, 5, 3)


def test_bad_fold_counts_are_named():
    with pytest.raises(ValueError, match=r"--folds must lie in \[3, number of graphs = 4\]"):
        fold_indices(torch.tensor([0, 1, 0, 1]), 5, 0)
    with pytest.raises(ConfigError, match="--folds 2: cross-validation needs --task graph"):
        load_config({"task": "graph", "folds": 2})
    with pytest.raises(ConfigError, match="--folds 10: cross-validation needs --task graph"):
        load_config({"task": "node", "folds": 10})
