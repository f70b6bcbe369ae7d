"""Timing one layer call as a training step runs it: forward, and its backward when the
step calls backward, without changing any value or gradient.

The forward is timed directly. The backward is bracketed by two identity autograd
functions: one on the layer's output (its backward runs when the output's gradient is
ready: the layer's backward starts) and one on every tensor the layer reads (its
backward runs once all their gradients are computed: the layer's backward is done).
The layer's seconds reach `done(seconds, faults)` when the backward finishes, or right
after the forward when no gradient will flow (inference, or nothing requires grad), with
the minor page faults taken in the same spans (`_faults`: a race whose first plan
spends its runs faulting brings in the default).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from gnnforge.plan._faults import minor_faults

__all__ = ["timed_call"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Clock:
    def __init__(self, device: torch.device, forward_s: float,
                 done: Callable[[float, int], None]) -> None:
        self.device, self.forward_s, self.done = device, forward_s, done
        self.backward_start = 0.0
        self.forward_faults = self.backward_faults = 0


class _BackwardStarts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, clock: _Clock, out: Tensor) -> Tensor:
        ctx.clock = clock
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: Tensor):
        _sync(ctx.clock.device)
        ctx.clock.backward_faults = minor_faults()
        ctx.clock.backward_start = time.perf_counter()
        return None, grad


class _BackwardEnds(torch.autograd.Function):
    @staticmethod
    def forward(ctx, clock: _Clock, *tensors: Tensor):
        ctx.clock = clock
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        clock = ctx.clock
        _sync(clock.device)
        seconds = clock.forward_s + time.perf_counter() - clock.backward_start
        clock.done(seconds, clock.forward_faults + minor_faults() - clock.backward_faults)
        return (None, *grads)


def timed_call(run: Callable[[dict[str, Tensor]], Tensor], leaves: Mapping[str, Tensor],
               done: Callable[[float, int], None], backward: bool = True) -> Tensor:
    """`run(leaves)`, timed; `done(seconds, faults)` gets forward + backward seconds and
    the minor page faults taken in them.

    Args:
        run: the layer's computation from its input tensors.
        leaves: every tensor `run` reads that may carry a gradient (features, weights).
        done: called once with the call's seconds and page faults (never, if a gradient
            starts flowing back but the step stops before reaching the inputs).
        backward: time the backward too when a gradient can flow; False times the
            forward alone (an eval-mode layer called with autograd on: its output is
            usually never differentiated, and waiting for a backward would never end).
    """
    device = next(iter(leaves.values())).device
    leaves = dict(leaves)
    # Only tensors that carry a gradient are bracketed: wrapping the others would make
    # autograd compute gradients nobody asked for (the first layer's input features).
    names = [n for n, t in leaves.items() if t.requires_grad]
    grads = backward and torch.is_grad_enabled() and bool(names)
    clock = _Clock(device, 0.0, done)
    if grads:
        leaves.update(zip(names, _BackwardEnds.apply(clock, *(leaves[n] for n in names))))
    _sync(device)
    faults = minor_faults()
    start = time.perf_counter()
    out = run(leaves)
    _sync(device)
    clock.forward_s = time.perf_counter() - start
    clock.forward_faults = minor_faults() - faults
    if not grads or not out.requires_grad:
        done(clock.forward_s, clock.forward_faults)
        return out
    return _BackwardStarts.apply(clock, out)
