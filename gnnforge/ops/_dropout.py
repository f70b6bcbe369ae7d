"""`dropout(x, p, training)`: inverted dropout whose mask is a hash of the element's index;
`relu_dropout(x, p, training)`: the same of relu(x), in one pass.

torch's CPU dropout draws its mask with `bernoulli_`, one Mersenne-Twister draw per
element on one thread: 1.19 s for the [580k, 100] input rows of a products-sized
GraphSAGE step (one thread); with the hidden layers', 60% of the `gnnforge train` step
there (cProfile). Here element i of a
call keeps its value when the top 32 bits of SplitMix64's i-th output for the call's seed
(a counter hashed by a bijective mixer, so every element gets an independent-looking
draw) are at least p * 2^32; one vectorised pass computes mask and product (110 ms there,
74 ms on two threads). The mask is never stored: backward recomputes it from the seed
(relu_dropout's only for NaN outputs: the others show it), so dropout holds no [n, F]
mask for autograd either. Outputs come from the kernels' reused buffers (`_buffers`): a
fresh [58.5k, 256] output page-faulted 60-120 ms a call in that step, more than the hash
(2026-12-02, one thread: the backward's call 113-155 ms fresh, 29-34 ms pooled).

The seed is drawn from torch's default generator (or `generator`), so `torch.manual_seed`
makes a run repeat. Values are x * (1 / (1 - p)) or x * 0 (NaN stays NaN), as torch's.
Tensors numba cannot take (not CPU, not float32/float64) and traced code (torch.compile)
run `torch.nn.functional.dropout`.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
import torch.nn.functional as F
from numba import prange
from torch import Tensor

from gnnforge.ops._buffers import pooled_empty
from gnnforge.ops._cpu import _launch

__all__ = ["dropout", "dropout_ref", "relu_dropout"]

_DTYPES = (torch.float32, torch.float64)
_JIT = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy")
# SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): state i * GOLDEN + seed, then the mixer.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32))


@numba.njit(inline="always")
def _draw(seed, i):
    """The top 32 bits of SplitMix64's i-th output for `seed`."""
    first, second, third, top = _SHIFTS
    z = seed + np.uint64(i) * _GOLDEN
    z = (z ^ (z >> first)) * _MIX_1
    z = (z ^ (z >> second)) * _MIX_2
    return (z ^ (z >> third)) >> top


@numba.njit(**_JIT)
def _dropout_span(x, out, seed, threshold, scale, start, stop):
    """out[i] = x[i] * (scale if draw(seed, i) >= threshold else 0) for i in [start, stop)."""
    zero = scale - scale
    for i in range(start, stop):
        out[i] = x[i] * (scale if _draw(seed, i) >= threshold else zero)


@numba.njit(**_JIT)
def _relu_dropout_span(x, out, seed, threshold, scale, start, stop):
    """`_dropout_span` of relu(x) (torch's: NaN and -0.0 pass, negatives become 0)."""
    zero = scale - scale
    for i in range(start, stop):
        value = zero if x[i] < zero else x[i]
        out[i] = value * (scale if _draw(seed, i) >= threshold else zero)


@numba.njit(**_JIT)
def _relu_dropout_grad_span(grad, out, result, seed, threshold, scale, start, stop):
    """The gradient of `_relu_dropout_span` from its `result`: scale where the element was
    kept and relu passed it (result not <= 0, as torch's threshold_backward), else 0.

    A result above 0 was kept (a dropped one is 0, or NaN from an infinite input) and one
    at or below 0 gets 0 either way, so only NaN results need their draw: one vectorised
    pass without the hash (23.6 -> 16.3 ms on [58.5k, 256], one thread), then the NaNs
    of a span that has any, the same bits."""
    zero = scale - scale
    unordered = False
    for i in range(start, stop):
        value = result[i]
        out[i] = grad[i] * (scale if value > zero else zero)
        unordered |= value != value
    if unordered:
        for i in range(start, stop):
            if result[i] != result[i]:
                out[i] = grad[i] * (scale if _draw(seed, i) >= threshold else zero)


@numba.njit(parallel=True, **_JIT)
def _dropout_kernel(x, out, seed, threshold, scale, relu, num_chunks):
    """`_dropout_span` (of relu(x) with `relu`) over the flat `x`, in contiguous chunks."""
    size = x.shape[0]
    for chunk in prange(num_chunks):
        start, stop = size * chunk // num_chunks, size * (chunk + 1) // num_chunks
        if relu:
            _relu_dropout_span(x, out, seed, threshold, scale, start, stop)
        else:
            _dropout_span(x, out, seed, threshold, scale, start, stop)


@numba.njit(parallel=True, **_JIT)
def _relu_dropout_grad_kernel(grad, out, result, seed, threshold, scale, num_chunks):
    size = grad.shape[0]
    for chunk in prange(num_chunks):
        _relu_dropout_grad_span(grad, out, result, seed, threshold, scale,
                                size * chunk // num_chunks, size * (chunk + 1) // num_chunks)


def _threshold(p: float) -> np.uint64:
    """Draws (32-bit) below this are dropped: P(keep) = 1 - p to within 2^-32."""
    return np.uint64(min(round(p * 2**32), 2**32))


def _scalars(dtype: torch.dtype, seed: int, p: float) -> tuple:
    """The kernels' seed, threshold and scale (in the data's float type)."""
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    kind = np.float32 if dtype == torch.float32 else np.float64
    return np.uint64(seed), _threshold(p), kind(scale)


def _apply(x: Tensor, seed: int, p: float, relu: bool) -> Tensor:
    """x (relu(x) with `relu`) times its multipliers for `seed` (CPU float32/float64);
    relu with p = 0 is torch's own (`clamp_min`), into a reused buffer."""
    flat = x.detach().contiguous().view(-1)
    out = pooled_empty(flat.shape, flat.dtype)
    if relu and p == 0.0:
        return torch.clamp_min(flat, 0, out=out).view(x.shape)
    _launch(_dropout_kernel, flat.numel(), flat.numel(), flat.numpy(), out.numpy(),
            *_scalars(x.dtype, seed, p), relu)
    return out.view(x.shape)


class _Dropout(torch.autograd.Function):
    """y = x * m(seed); dy/dx = m(seed): backward is the same product on the gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, seed: int, p: float) -> Tensor:
        ctx.seed, ctx.p = seed, p
        return _apply(x, seed, p, relu=False)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        return _Dropout.apply(grad, ctx.seed, ctx.p), None, None


class _ReluDropout(torch.autograd.Function):
    """y = relu(x) * m(seed); backward reads y (as torch's relu does), not x."""

    @staticmethod
    def forward(ctx, x: Tensor, seed: int, p: float) -> Tensor:
        out = _apply(x, seed, p, relu=True)
        ctx.save_for_backward(out)
        ctx.seed, ctx.p = seed, p
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (result,) = ctx.saved_tensors
        return _ReluDropoutGrad.apply(grad, result, ctx.seed, ctx.p), None, None


class _ReluDropoutGrad(torch.autograd.Function):
    """grad * m'(seed, result), linear in grad (result's own gradient is zero almost
    everywhere, as relu's): its backward is itself."""

    @staticmethod
    def forward(ctx, grad: Tensor, result: Tensor, seed: int, p: float) -> Tensor:
        ctx.save_for_backward(result)
        ctx.seed, ctx.p = seed, p
        flat, reference = grad.detach().contiguous().view(-1), result.detach().view(-1)
        out = pooled_empty(flat.shape, flat.dtype)
        if p == 0.0:  # torch's relu backward, bit for bit (a NaN or inf grad is 0 there)
            torch.ops.aten.threshold_backward.grad_input(flat, reference, 0, grad_input=out)
            return out.view(grad.shape)
        _launch(_relu_dropout_grad_kernel, flat.numel(), flat.numel(), flat.numpy(),
                out.numpy(), reference.numpy(), *_scalars(grad.dtype, seed, p))
        return out.view(grad.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:
        (result,) = ctx.saved_tensors
        return _ReluDropoutGrad.apply(grad, result, ctx.seed, ctx.p), None, None, None


def _check(p: float, name: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: p is a probability and must lie in [0, 1], got {p}")


def _counter_based(x: Tensor) -> bool:
    """Whether the numba kernels take x (else torch's dropout runs)."""
    return (x.device.type == "cpu" and x.dtype in _DTYPES
            and not torch.compiler.is_compiling())


def _seed(generator: torch.Generator | None) -> int:
    return int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64, generator=generator))


def dropout(x: Tensor, p: float = 0.5, training: bool = True,
            generator: torch.Generator | None = None) -> Tensor:
    """`torch.nn.functional.dropout(x, p, training)`, with a counter-based mask on CPU.

    Each element is zeroed with probability p and the rest scaled by 1 / (1 - p)
    (Srivastava et al., JMLR 2014, inverted as torch does). On CPU float32/float64 the
    mask is hashed from one seed drawn from `generator` (torch's default when None) and
    the element's flat index, so it does not depend on the thread count; elsewhere this
    is torch's dropout.

    Args:
        x: any shape. p: drop probability in [0, 1]. training: False returns x.
        generator: where the seed comes from (CPU generator).

    Raises:
        ValueError: when p is outside [0, 1].
    """
    _check(p, "dropout")
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if not _counter_based(x):
        return F.dropout(x, p, training)
    return _Dropout.apply(x, _seed(generator), p)


def relu_dropout(x: Tensor, p: float = 0.5, training: bool = True,
                 generator: torch.Generator | None = None) -> Tensor:
    """`dropout(torch.relu(x), p, training, generator)` in one pass (the same values and
    mask for the same generator state); backward in one pass too, from the output.

    What a hidden layer of DGL's and PyG's GraphSAGE examples does after its convolution;
    fused, it skips writing and reading relu(x) and relu's own backward pass. Without
    dropout (p = 0, or eval) it is `torch.relu` (same bits, same gradient), with its
    output and gradient in reused buffers: a fresh [58.5k, 256] output page-faults about
    20 ms a call on one thread, three times relu itself.

    Raises:
        ValueError: when p is outside [0, 1].
    """
    _check(p, "relu_dropout")
    dropping = training and p > 0.0
    if x.numel() == 0 or not _counter_based(x):
        return F.dropout(torch.relu(x), p, training) if dropping else torch.relu(x)
    if not dropping:  # torch.relu's values and gradient, into reused buffers; no seed drawn
        return _ReluDropout.apply(x, 0, 0.0)
    return _ReluDropout.apply(x, _seed(generator), p)


def dropout_ref(x: Tensor, p: float, seed: int) -> Tensor:
    """The specification of `dropout`'s CPU path for a given seed, in numpy uint64."""
    with np.errstate(over="ignore"):
        index = np.arange(x.numel(), dtype=np.uint64)
        z = np.uint64(seed) + index * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX_1
        z = (z ^ (z >> np.uint64(27))) * _MIX_2
        z = z ^ (z >> np.uint64(31))
    keep = torch.from_numpy((z >> np.uint64(32)) >= _threshold(p)).view(x.shape)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    multiplier = torch.where(keep, torch.tensor(scale, dtype=x.dtype),
                             torch.tensor(0.0, dtype=x.dtype))
    return x * multiplier
