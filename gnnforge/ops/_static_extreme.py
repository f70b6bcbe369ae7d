"""Max/min of edge messages per destination in one `scatter_reduce` that XLA can lower.

The reference (`_reference._extreme_ref`) scatters with `include_self=False` twice: once
to find each row's result, once from an initial value made to differ from it, so that
ties share the gradient among edges only. torch_xla lowers `scatter_reduce` only with
`include_self=True`; the other form runs on the CPU (an `aten::scatter_reduce.two`
fallback, twice a step for GAT's attention). Here the initial value of a row with edges
is the reduction's identity (-inf for max, +inf for min), which no edge's message can
exceed, so it never wins and never ties with a finite result; a row without edges keeps
0. The values and the gradients equal the reference's.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["extreme_static"]


def extreme_static(dst: Tensor, message: Tensor, shape: tuple[int, ...], reduce: str) -> Tensor:
    """[shape] 'amax' or 'amin' of `message` rows [E, *F] into rows `dst` [E]; 0 where a row
    has no edge."""
    index = dst.reshape(-1, *[1] * (message.dim() - 1)).expand_as(message)
    has_edge = torch.zeros(shape[0], dtype=torch.bool, device=dst.device)
    has_edge[dst] = True
    identity = float("-inf") if reduce == "amax" else float("inf")
    initial = torch.where(has_edge.reshape(-1, *[1] * (len(shape) - 1)),
                          torch.full(shape, identity, dtype=message.dtype, device=message.device),
                          torch.zeros(shape, dtype=message.dtype, device=message.device))
    return initial.scatter_reduce(0, index, message, reduce=reduce, include_self=True)
