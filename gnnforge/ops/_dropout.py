"""`dropout(x, p, training)`: inverted dropout whose mask is a hash of the element's index.

torch's CPU dropout draws its mask with `bernoulli_`, one Mersenne-Twister draw per
element on one thread: 1.19 s for the [580k, 100] input rows of a products-sized
GraphSAGE step (one thread), 60% of the `gnnforge train` step there. Here element i of a
call keeps its value when the top 32 bits of SplitMix64's i-th output for the call's seed
(a counter hashed by a bijective mixer, so every element gets an independent-looking
draw) are at least p * 2^32; one vectorised pass computes mask and product (110 ms there,
74 ms on two threads). The mask is never stored: backward recomputes it from the seed, so
dropout holds no [n, F] mask for autograd either.

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

from gnnforge.ops._cpu import _launch

__all__ = ["dropout", "dropout_ref"]

_DTYPES = (torch.float32, torch.float64)
_JIT = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy")
# SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): state i * GOLDEN + seed, then the mixer.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32))


@numba.njit(**_JIT)
def _dropout_span(x, out, seed, threshold, scale, start, stop):
    """out[i] = x[i] * (scale if draw(seed, i) >= threshold else 0) for i in [start, stop)."""
    zero = scale - scale
    first, second, third, top = _SHIFTS
    for i in range(start, stop):
        z = seed + np.uint64(i) * _GOLDEN
        z = (z ^ (z >> first)) * _MIX_1
        z = (z ^ (z >> second)) * _MIX_2
        z = z ^ (z >> third)
        out[i] = x[i] * (scale if (z >> top) >= threshold else zero)


@numba.njit(parallel=True, **_JIT)
def _dropout_kernel(x, out, seed, threshold, scale, num_chunks):
    """`_dropout_span` over all of the flat `x`, in `num_chunks` contiguous chunks."""
    size = x.shape[0]
    for chunk in prange(num_chunks):
        _dropout_span(x, out, seed, threshold, scale, size * chunk // num_chunks,
                      size * (chunk + 1) // num_chunks)


def _threshold(p: float) -> np.uint64:
    """Draws (32-bit) below this are dropped: P(keep) = 1 - p to within 2^-32."""
    return np.uint64(min(round(p * 2**32), 2**32))


def _apply(x: Tensor, seed: int, p: float) -> Tensor:
    """x times its multipliers for `seed` (contiguous CPU float32/float64)."""
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    kind = np.float32 if x.dtype == torch.float32 else np.float64
    _launch(_dropout_kernel, flat.numel(), flat.numel(), flat.detach().numpy(), out.numpy(),
            np.uint64(seed), _threshold(p), kind(scale))
    return out.view(x.shape)


class _Dropout(torch.autograd.Function):
    """y = x * m(seed); dy/dx = m(seed): backward is the same product on the gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, seed: int, p: float) -> Tensor:
        ctx.seed, ctx.p = seed, p
        return _apply(x, seed, p)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        return _Dropout.apply(grad, ctx.seed, ctx.p), None, None


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
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p is a probability and must lie in [0, 1], got {p}")
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if (x.device.type != "cpu" or x.dtype not in _DTYPES
            or torch.compiler.is_compiling()):
        return F.dropout(x, p, training)
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64, generator=generator))
    return _Dropout.apply(x, seed, p)


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
