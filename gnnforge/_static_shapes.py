"""Where a step must keep static shapes: traced by torch.compile, or on a lazy XLA device.

Two kinds of execution compile the whole step ahead of running it. Under torch.compile the
tracer sees fake tensors; under torch_xla every op is recorded into a graph that XLA
compiles when the step ends (`torch_xla.sync()`). Both cache a compiled graph per set of
input shapes, and both pay for a host read: dynamo breaks the graph, XLA cuts the step,
compiles the part before it and runs it early. So in both, code must not read a tensor
on the host (`int(t)`, `bool(t.any())`, `.item()`) and must not make a shape from data
(`torch.unique`, `nonzero`, boolean indexing, a slice to a computed length).
`torch.compiler.is_compiling()` answers only the first case: on XLA it is False, and
the eager branches that read the host ran every step (issue 30). `static_shapes` answers
both; code that asks "may I read the host or slice by data here?" asks it.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["bincount", "lazy_device", "static_shapes"]


def lazy_device(tensor: Tensor | None) -> bool:
    """True when `tensor` lives on an XLA device (recorded now, compiled at the step's end)."""
    return tensor is not None and tensor.device.type == "xla"


def static_shapes(*tensors: Tensor | None) -> bool:
    """True under torch.compile or when any of `tensors` is an XLA tensor: no host reads
    and no data-dependent shapes here."""
    return torch.compiler.is_compiling() or any(lazy_device(t) for t in tensors)


def bincount(index: Tensor, length: int) -> Tensor:
    """[length] int64 count of each value in `index` (all in [0, length)): `torch.bincount`,
    or on XLA, which cannot lower bincount (a CPU fallback), a scatter-add of ones."""
    if lazy_device(index):
        ones = torch.ones_like(index, dtype=torch.int64)
        return torch.zeros(length, dtype=torch.int64, device=index.device).index_add(0, index,
                                                                                      ones)
    return torch.bincount(index, minlength=length)
