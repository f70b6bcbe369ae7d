"""Batch normalisation that ignores padding rows, keeping tensor shapes static."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gnnforge._static_shapes import static_shapes

__all__ = ["MaskedBatchNorm1d"]


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """`torch.nn.BatchNorm1d` over the rows where `mask` is True only.

    Packed batches carry padding nodes; plain batch norm would mix their values into the
    batch statistics. With a mask, training-mode statistics are the mean and (biased)
    variance of the real rows, and the running estimates use the unbiased variance, exactly
    as BatchNorm1d computes them on `x[mask]`; padding rows are normalised too (their
    values are never read) so the output keeps x's shape. Without a mask it is BatchNorm1d.
    Parameter and buffer names equal BatchNorm1d's, so state dicts load either way.

    Packed batches put every padding row after the real ones; for such a prefix mask the
    real rows go through torch's fused batch norm kernel (one pass forward, one backward,
    instead of a dozen element-wise ops) and the padding rows are normalised with the same
    statistics, detached: padding outputs never reach a loss, and the real rows' values,
    gradients and running estimates equal the general path's.

    Shapes:
        x: [N, C] float; mask: [N] bool or None; returns [N, C].
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is None or not (self.training or not self.track_running_stats):
            return super().forward(x)
        # Static shapes (torch.compile, XLA): the general masked path; finding the prefix
        # reads the mask on the host and slices to a data-dependent size.
        real = None if static_shapes(x, mask) else _prefix_length(mask)
        if real is not None and real >= 2:
            return self._prefix_forward(x, real)
        weight = mask.to(x.dtype)                                      # [N]
        count = weight.sum().clamp(min=1.0)
        mean = _row_sum(weight, x) / count                             # [C]
        centred = x - mean                                             # [N, C]
        var = _row_sum(weight, centred.square()) / count               # [C] biased
        if self.track_running_stats and self.training:
            self._update_running(mean, var, count)
        scale = torch.rsqrt(var + self.eps)
        if self.affine:
            return torch.addcmul(self.bias, centred, scale * self.weight)
        return centred * scale

    def _prefix_forward(self, x: Tensor, real: int) -> Tensor:
        """Rows [0, real) are real: fused batch norm on them, the same scaling on the rest."""
        factor = 0.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                      else self.momentum)
        out, mean, invstd = torch.native_batch_norm(
            x[:real], self.weight, self.bias,
            self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None, True, factor, self.eps)
        if real == x.shape[0]:
            return out
        scale = invstd.detach() if self.weight is None else invstd.detach() * self.weight
        padding = (x[real:] - mean.detach()) * scale                             # [P, C]
        if self.bias is not None:
            padding = padding + self.bias
        return torch.cat([out, padding])

    @torch.no_grad()
    def _update_running(self, mean: Tensor, var: Tensor, count: Tensor) -> None:
        self.num_batches_tracked += 1
        momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                    else self.momentum)
        unbiased = var * count / (count - 1).clamp(min=1.0)
        self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
        self.running_var.mul_(1 - momentum).add_(unbiased.detach(), alpha=momentum)


def _row_sum(weight: Tensor, x: Tensor) -> Tensor:
    """[C] sum over rows n of weight[n] * x[n] for x [N, C].

    Eager: a matrix-vector product, one BLAS pass with no [N, C] temporary (4.5 us for
    [526, 128], against 8 for multiply-and-sum). Traced (torch.compile): multiply-and-sum,
    which inductor fuses with the element-wise work around it into its own loops, where a
    product is a call out to BLAS that nothing fuses with; forward and backward of the
    main job's six batch norms made 24 such calls per step, and the compiled step ran at
    0.99x eager with them, 1.02x without (benchmarks/compile.py, one interleaved run
    each). Same sums, other rounding. XLA fuses the same way, so it takes that form too.
    """
    if static_shapes(x):
        return (x * weight.unsqueeze(1)).sum(0)
    return weight @ x


def _prefix_length(mask: Tensor) -> int | None:
    """k when mask is True exactly on rows [0, k), else None."""
    if mask.dim() != 1 or mask.dtype != torch.bool:
        return None
    real = int(mask.sum())
    if bool(mask[:real].all()) and not bool(mask[real:].any()):
        return real
    return None
