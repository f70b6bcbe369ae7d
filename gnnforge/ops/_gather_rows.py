"""`gather_rows(x, index)`: x[index] for the input features of a sampled minibatch.

Candidates: the native builds' copy kernel and index_select, both writing into reused
output buffers (`_buffers`; equal values, but a -0.0 in a row narrower than one of a
native build's vectors comes back as +0.0). The kernel class's calibration times them on 64-float rows, one register
block, where the native copy wins (60 vs 91 ms); on wider rows its general path keeps
nothing in flight (products-sized step, 580k random 100-float rows, one thread: native
385 ms, index_select about 95). So the first large gather from a feature matrix races
every candidate on its real rows (`_trials`, as the aggregations do on their graph, but
not only the close ones: at two threads the calibration timed the AVX2 copy at 3.8 ms
against index_select's 7.8, past the contender ratio, while on the products rows it took
131 ms against 54) and keeps the winner for that matrix. The race runs on the index's
first `TRIAL_ROWS`, not the whole batch, whose batch-sized trial outputs had cost +870 MiB
peak RSS on the products-sized benchmark (when a trial held one per candidate) and whose
calls would time several whole gathers; its same-bits check covers that sample only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge.ops import _calibration, _cpu_kernels, _native, _trials
from gnnforge.ops._kernel_class import KernelClass, classify

__all__ = ["gather_rows"]

# Below this many gathered elements index_select runs: the selection's lookup and the
# native call's setup cost more than they save.
MIN_ELEMENTS = 1 << 16
# Rows of the index a trial gathers (26 MB of 100-float rows: past the caches, so the copies
# wait on memory as the whole batch's do).
TRIAL_ROWS = 1 << 16


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """`x.index_select(0, index)`, through the fastest measured CPU kernel where one applies.

    The native path takes a 2-D contiguous float32/float64 CPU tensor that needs no
    gradient (a memory-mapped feature file qualifies) and a 1-D int32/int64 index;
    anything else (and small gathers) is index_select, with its autograd and devices.

    Raises:
        IndexError: when an index is outside [0, x.shape[0]) (naming the first one).
    """
    if not _native_path(x, index):
        return x.index_select(0, index)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= x.shape[0]):
        bad = index[(index < 0) | (index >= x.shape[0])][0]
        position = int((index == bad).nonzero()[0])
        raise IndexError(f"gather_rows: index[{position}] = {int(bad)} is outside "
                         f"[0, {x.shape[0]})")
    width = x.shape[1]
    kernel_class = classify(_cpu_kernels.GATHER, "-", x.dtype, index.dtype, width,
                            index.shape[0] * width * x.element_size())
    return _cpu_kernels.fixed_gather(_choice(kernel_class, x, index))(x, index)


def _choice(kernel_class: KernelClass, x: Tensor, index: Tensor) -> str:
    """The candidate for gathers from `x`: the calibration's, refined by a trial of every
    candidate on the first `TRIAL_ROWS` of `index` (one per feature matrix and index
    dtype, `_trials`)."""
    calibrated = _calibration.choice(kernel_class, _cpu_kernels)
    sample = index[:TRIAL_ROWS]
    matrix = (x.data_ptr(), x.shape[0], x.shape[1], index.element_size())
    return _trials.choose(kernel_class, calibrated, matrix, sample.numel() * x.shape[1],
                          lambda name: _cpu_kernels.fixed_gather(name)(x, sample),
                          candidates=_cpu_kernels.candidates(kernel_class))


def _native_path(x: Tensor, index: Tensor) -> bool:
    return (x.device.type == "cpu" and index.device.type == "cpu" and x.dim() == 2
            and x.dtype in (torch.float32, torch.float64) and x.is_contiguous()
            and not (x.requires_grad and torch.is_grad_enabled())
            and index.dim() == 1 and index.dtype in (torch.int32, torch.int64)
            and index.is_contiguous() and index.numel() * x.shape[1] >= MIN_ELEMENTS
            and bool(_cpu_kernels.native_variants()) and _native.available())
