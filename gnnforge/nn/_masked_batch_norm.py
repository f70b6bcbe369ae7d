"""Batch normalisation that ignores padding rows, keeping tensor shapes static."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["MaskedBatchNorm1d"]


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """`torch.nn.BatchNorm1d` over the rows where `mask` is True only.

    Packed batches carry padding nodes; plain batch norm would mix their values into the
    batch statistics. With a mask, training-mode statistics are the mean and (biased)
    variance of the real rows, and the running estimates use the unbiased variance, exactly
    as BatchNorm1d computes them on `x[mask]`; padding rows are normalised too (their
    values are never read) so the output keeps x's shape. Without a mask it is BatchNorm1d.
    Parameter and buffer names equal BatchNorm1d's, so state dicts load either way.

    Shapes:
        x: [N, C] float; mask: [N] bool or None; returns [N, C].
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is None or not (self.training or not self.track_running_stats):
            return super().forward(x)
        weight = mask.to(x.dtype)                                      # [N]
        count = weight.sum().clamp(min=1.0)
        # Reductions over rows as matrix-vector products: one pass each, no [N, C] temporaries
        # beyond the centred values, which the output reuses.
        mean = (weight @ x) / count                                    # [C]
        centred = x - mean                                             # [N, C]
        var = (weight @ centred.square()) / count                      # [C] biased
        if self.track_running_stats and self.training:
            self._update_running(mean, var, count)
        scale = torch.rsqrt(var + self.eps)
        if self.affine:
            return torch.addcmul(self.bias, centred, scale * self.weight)
        return centred * scale

    @torch.no_grad()
    def _update_running(self, mean: Tensor, var: Tensor, count: Tensor) -> None:
        self.num_batches_tracked += 1
        momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                    else self.momentum)
        unbiased = var * count / (count - 1).clamp(min=1.0)
        self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
        self.running_var.mul_(1 - momentum).add_(unbiased.detach(), alpha=momentum)
