"""Node degrees of a graph, with static shapes where the step must keep them.

`torch.bincount` sizes its output from the data (the largest index) unless told a
minimum, and torch_xla cannot lower it: on an XLA tensor it runs on the CPU (an
`aten::bincount` fallback, a host round trip every step). A graph with the compressed
formats already has its degrees as the differences of the row pointers, one subtraction
of two static slices; a `StaticBatch` computed them on the CPU when it was built.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gnnforge._static_shapes import lazy_device

__all__ = ["in_degree", "out_degree"]


def in_degree(graph: Any) -> Tensor:
    """[num_dst_nodes] int64 number of edges into each destination node."""
    dst = graph.coo()[1]
    if lazy_device(dst):
        return _pointer_differences(graph.csr()[0])
    return torch.bincount(dst, minlength=graph.num_dst_nodes)


def out_degree(graph: Any) -> Tensor:
    """[num_src_nodes] int64 number of edges out of each source node."""
    src = graph.coo()[0]
    if lazy_device(src):
        return _pointer_differences(graph.csc()[0])
    return torch.bincount(src, minlength=graph.num_src_nodes)


def _pointer_differences(pointers: Tensor) -> Tensor:
    return (pointers[1:] - pointers[:-1]).to(torch.int64)
