"""From a graph to the kernels' inputs: the kernel protocol check and GraphArrays.

Kernels take plain tensors, never a framework object (DESIGN.md): a public function checks
that its graph has the kernel protocol (`num_src_nodes`, `num_dst_nodes`, `num_edges`,
`coo()`, `csr()`, `csc()`; see gnnforge/graph.py), that operands sit on the graph's device,
and hands the custom ops the graph's cached CSR/CSC/COO as GraphArrays in the index dtype
the kernels read. Shared by every public function (`_generic`, `_fast_copy`,
`_edge_softmax`) below all of them.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_device", "check_graph", "graph_arrays", "index_dtype"]

_PROTOCOL = ("num_src_nodes", "num_dst_nodes", "num_edges", "coo", "csr", "csc")


_CHECKED_TYPES: set[type] = set()  # graph classes known to have the protocol


def check_graph(graph) -> None:
    """TypeError unless `graph` has the kernel protocol (checked once per class)."""
    if type(graph) in _CHECKED_TYPES:  # one set lookup per call instead of six hasattr
        return
    missing = [name for name in _PROTOCOL if not hasattr(graph, name)]
    if missing:
        raise TypeError(f"graph: expected a gnnforge Graph or an object with the kernel "
                        f"protocol {_PROTOCOL}; {type(graph).__name__} lacks {missing}")
    # Class-level: every instance. Not while compiling: a traced mutation of this global
    # would fail dynamo's guard on it at the next call and recompile.
    if not torch.compiler.is_compiling() and all(hasattr(type(graph), name)
                                                 for name in _PROTOCOL):
        _CHECKED_TYPES.add(type(graph))


def check_device(graph, lhs: Tensor | None, rhs: Tensor | None) -> torch.device:
    """The graph's device; ValueError naming the operand on another one."""
    graph_device = graph.coo()[0].device
    for name, tensor in (("lhs", lhs), ("rhs", rhs)):
        if tensor is not None and tensor.device != graph_device:
            raise ValueError(f"{name} is on {tensor.device} but the graph is on {graph_device}; "
                             f"move one with .to()")
    return graph_device


def index_dtype(graph, forced: torch.dtype | None) -> torch.dtype:
    """The forced CSR index dtype, else int32 whenever the graph fits."""
    if forced is not None:
        return forced
    largest = max(graph.num_src_nodes, graph.num_dst_nodes, graph.num_edges)
    return torch.int32 if largest < 2**31 - 1 else torch.int64


_EMPTY: dict = {}


def graph_arrays(graph, forced_dtype: torch.dtype | None, csc: bool, coo: bool) -> list[Tensor]:
    """GraphArrays (`_layout`) for the custom ops: CSC/COO only when needed."""
    dtype = index_dtype(graph, forced_dtype)
    rowptr, col, eids = graph.csr(dtype)
    if torch.compiler.is_compiling():  # no global cache: mutating it would recompile
        empty = rowptr.new_empty(0)
    else:
        empty = _EMPTY.get((dtype, rowptr.device))
    if empty is None:  # read-only placeholder for the arrays a call does not need
        empty = _EMPTY.setdefault((dtype, rowptr.device), rowptr.new_empty(0))
    colptr, row, ceids = graph.csc(dtype) if csc else (empty, empty, empty)
    src, dst = graph.coo() if coo or csc else (empty, empty)
    return [rowptr, col, eids, colptr, row, ceids, src, dst]
