"""Link-prediction metrics: MRR and Hits@K against each positive's own negatives, AUC.

Each positive pair (u, v) is ranked among its K negatives (u, w_1..w_K) as in OGB's
ogbl-citation2: rank = 1 + the number of negatives scoring at least as high (ties count
against the positive). MRR is the mean of 1 / rank, Hits@K the fraction with rank <= K.
AUC is the probability that a random positive outscores a random negative (ties: half).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["auc", "link_metrics", "ranks"]


def ranks(positive: Tensor, negative: Tensor) -> Tensor:
    """[P] rank of positive[i] among negative[i] ([P, K])."""
    return 1 + (negative >= positive[:, None]).sum(1)


def auc(positive: Tensor, negative: Tensor) -> float:
    """Mann-Whitney AUC of all positive scores against all negative scores."""
    positive, negative = positive.flatten().double(), negative.flatten().double()
    if positive.numel() == 0 or negative.numel() == 0:
        return float("nan")
    scores = torch.cat([positive, negative])
    order = torch.argsort(scores)
    ranked = torch.empty_like(scores)
    ranked[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    values, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    # average rank within each group of ties
    sums = torch.zeros(values.numel(), dtype=torch.float64).index_add_(0, inverse, ranked)
    ranked = (sums / counts)[inverse]
    p, n = positive.numel(), negative.numel()
    return float((ranked[:p].sum() - p * (p + 1) / 2) / (p * n))


def link_metrics(positive: Tensor, negative: Tensor, split: str,
                 hits: tuple[int, ...] = (1, 10)) -> dict[str, float]:
    """{split_mrr, split_hits@K..., split_auc} for positives [P] and negatives [P, K]."""
    rank = ranks(positive, negative).double()
    out = {f"{split}_mrr": float((1 / rank).mean())}
    out.update({f"{split}_hits@{k}": float((rank <= k).double().mean()) for k in hits})
    out[f"{split}_auc"] = auc(positive, negative)
    return out
