"""Shared launch helpers of the Triton kernels: operand layout, block sizes, device checks."""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.runtime.interpreter import InterpretedFunction

from gnnforge.ops._shapes import broadcast_offsets

__all__ = ["accumulator", "check_runnable", "device_offsets", "edge_block", "feature_block",
           "no_index", "store_dtype"]

# Widest feature tile one program reduces: 128 float32 lanes are 512 contiguous bytes per
# gathered row, a whole number of 128-byte transactions, and keep the register tile of
# BLOCK_E x BLOCK_F within 4096 elements for every edge block below.
_MAX_FEATURE_BLOCK = 128
_TILE_ELEMENTS = 4096


def check_runnable(kernel, tensor: Tensor) -> None:
    """Raise when compiled kernels would get CPU tensors (or interpreted ones CUDA tensors).

    Triton decides between compiling and interpreting when a kernel is defined, from
    TRITON_INTERPRET at that moment, so the variable must be set before the first call.
    """
    interpreted = isinstance(kernel, InterpretedFunction)
    if tensor.device.type == "cpu" and not interpreted:
        raise RuntimeError("the Triton kernels were compiled for the GPU but got CPU tensors; "
                           "set TRITON_INTERPRET=1 before gnnforge's first Triton call to run "
                           "them on the CPU through Triton's interpreter")
    if tensor.device.type != "cpu" and interpreted:
        raise RuntimeError(f"the Triton kernels were loaded under TRITON_INTERPRET=1 (CPU "
                           f"interpreter) but got tensors on {tensor.device}; unset it")


def accumulator(dtype: torch.dtype):
    """float64 sums stay float64; every other float type accumulates in float32."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def store_dtype(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """dtype the kernels write for a result of `dtype` (then cast by the caller if it differs).

    Triton's interpreter converts float32 to bfloat16 by truncation (it ignores the
    rounding mode; GPUs round to nearest even), so on the CPU a bfloat16 result is
    written as float32 and rounded by PyTorch: interpreter and GPU then agree bit for bit.
    """
    if dtype == torch.bfloat16 and device.type == "cpu":
        return torch.float32
    return dtype


def feature_block(width: int) -> int:
    """Power of two covering `width` (at least 16 lanes), capped at _MAX_FEATURE_BLOCK."""
    return min(_MAX_FEATURE_BLOCK, max(16, triton.next_power_of_2(max(width, 1))))


def edge_block(mean_degree: float, block_f: int) -> int:
    """Edges gathered per step: about the mean in-degree, so short rows waste few lanes.

    At least 8 (one step of a typical row), at most what keeps the tile within
    _TILE_ELEMENTS registers.
    """
    wanted = triton.next_power_of_2(max(1, math.ceil(mean_degree)))
    return max(8, min(wanted, _TILE_ELEMENTS // block_f))


@functools.lru_cache(maxsize=256)
def device_offsets(operand_shape: tuple[int, ...], out_shape: tuple[int, ...], dot: bool,
                   device: torch.device) -> Tensor | None:
    """Operand column each output feature reads (`_shapes.broadcast_offsets`) on `device`.

    None for the identity (output feature f reads column f, a contiguous read the kernels
    do without a lookup); dot always gets its offsets (the start of each reduced run).
    Cached per shapes and device: a broadcast such as per-head weights otherwise costs a
    small host-to-device copy on every call.
    """
    offsets = broadcast_offsets(operand_shape, out_shape, dot)
    if not dot and torch.equal(offsets, torch.arange(offsets.numel())):
        return None
    return offsets.to(device)


def no_index(device: torch.device) -> Tensor:
    # A fresh tensor each time: custom-op outputs must not alias one another.
    return torch.empty(0, dtype=torch.int64, device=device)
