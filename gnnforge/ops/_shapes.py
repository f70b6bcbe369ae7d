"""Argument checks and DGL's feature broadcasting rules, shared by every backend.

A message `op(lhs, rhs)` combines two operands whose first dimension indexes rows (nodes
or edges) and whose remaining "feature" dimensions broadcast like NumPy's, after the
lower-rank operand gets size-1 dimensions inserted right after its first dimension
(DGL's rule: an edge scalar `[E]` or `[E, 1]` times a node vector `[N, F]`; per-head
`[E, H, 1]` times `[N, H, D]`). `dot` reduces the last dimension and keeps it as size 1.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "BINARY_OPS",
    "OPS",
    "REDUCES",
    "TARGETS",
    "broadcast_offsets",
    "check_op",
    "check_reduce",
    "check_target",
    "output_feature_shape",
    "pad_operands",
    "reduce_to_shape",
]

BINARY_OPS = ("add", "sub", "mul", "div", "dot")
OPS = ("copy_lhs", "copy_rhs", *BINARY_OPS)
REDUCES = ("sum", "mean", "max", "min")
TARGETS = ("u", "v", "e")


def check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")


def check_reduce(reduce: str) -> None:
    if reduce not in REDUCES:
        raise ValueError(f"reduce must be one of {REDUCES}, got {reduce!r}")


def check_target(name: str, target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"{name} must be 'u' (source), 'v' (destination) or 'e' (edge), "
                         f"got {target!r}")


def pad_operands(lhs: Tensor | None, rhs: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """Give 1-D operands a feature dimension and equalise ranks (size-1 dims after dim 0)."""
    if lhs is not None and lhs.dim() == 1:
        lhs = lhs.unsqueeze(-1)
    if rhs is not None and rhs.dim() == 1:
        rhs = rhs.unsqueeze(-1)
    if lhs is None or rhs is None or lhs.dim() == rhs.dim():
        return lhs, rhs
    rank = max(lhs.dim(), rhs.dim())
    lhs = lhs.reshape(lhs.shape[:1] + (1,) * (rank - lhs.dim()) + lhs.shape[1:])
    rhs = rhs.reshape(rhs.shape[:1] + (1,) * (rank - rhs.dim()) + rhs.shape[1:])
    return lhs, rhs


def output_feature_shape(op: str, lhs_shape: tuple[int, ...] | None,
                         rhs_shape: tuple[int, ...] | None) -> tuple[int, ...]:
    """Feature shape (without the row dimension) of `op(lhs, rhs)` for padded operands.

    Raises:
        ValueError: when the shapes do not broadcast, or `dot` operands differ in their
            last dimension.
    """
    if op == "copy_lhs":
        return tuple(lhs_shape)
    if op == "copy_rhs":
        return tuple(rhs_shape)
    if op == "dot":
        if lhs_shape[-1] != rhs_shape[-1]:
            raise ValueError(f"dot needs equal last dimensions, got lhs features {lhs_shape} "
                             f"and rhs features {rhs_shape}")
        return (*_broadcast(lhs_shape[:-1], rhs_shape[:-1]), 1)
    return _broadcast(lhs_shape, rhs_shape)


def _broadcast(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(torch.broadcast_shapes(tuple(left), tuple(right)))
    except RuntimeError as error:
        raise ValueError(f"feature shapes {tuple(left)} and {tuple(right)} do not broadcast "
                         f"(DGL rules: an edge scalar [E] or [E, 1] with node data [N, F], "
                         f"per-head [E, H, 1] with [N, H, D])") from error


def broadcast_offsets(operand_shape: tuple[int, ...], out_shape: tuple[int, ...],
                      dot: bool) -> Tensor:
    """[K] int64 offset into a flattened operand row for each flattened output feature.

    For `dot` the offset points at the start of the contiguous reduced last dimension.
    """
    size = math.prod(operand_shape)
    index = torch.arange(size, dtype=torch.int64).reshape(operand_shape)
    if dot:
        return index[..., 0].expand(out_shape[:-1]).reshape(-1).contiguous()
    return index.expand(out_shape).reshape(-1).contiguous()


def reduce_to_shape(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum a gradient of broadcast feature shape back to an operand's `[rows, *shape]`."""
    dims = [i + 1 for i, size in enumerate(shape) if size == 1 and grad.shape[i + 1] != 1]
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape(grad.shape[:1] + tuple(shape))
