"""A block whose destinations are each followed by their own table row: one GEMM for SAGE.

A SAGE layer computes W_l · aggr(x_u) + W_r · x_v. As two products over [Nd, F] operands
that is two GEMMs of inner size F, the second adding into the first's output (one more
pass over it). One GEMM of the operand [aggr(x_u) | x_v], [Nd, 2F], against [W_l; W_r]
is faster: for the products-sized step's first layer ([58.5k, 100] operands, F_out 256)
the forward took 47.4 -> 37.8 ms at one thread and 21.6 -> 17.5 at two, the weight
gradient 44.0 -> 34.3 and 21.2 -> 17.0 (operands built beforehand, minimum of three
medians). Copying the two halves side by side first, whole or in cache-sized row blocks,
cost about as much as it saved.

`RootedTableSources` builds it without a copy. It is `TableSources` (source ids are
table rows) with 2 Nd destination rows: row 2v holds v's in-edges and row 2v+1 a single
edge to v's own table row. A mean or sum over it is [2 Nd, F] in row-major order, which is
the [Nd, 2F] operand: the aggregation kernel gathers the root rows too, and a row of one
edge reduces to that row. With the cost of gathering the root rows in the
kernel, the layer's forward and weight gradients there took 165.1 -> 154.2 ms at one
thread and 87.2 -> 81.0 at two (benchmarks/sage_root.py, 2026-12-05, Intel host); with
glibc keeping freed blocks 164.6 -> 158.4 and 86.6 -> 87.4.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from torch import Tensor

from gnnforge.nn._indexed_rows import TableSources

__all__ = ["RootedTableSources"]


class RootedTableSources(TableSources):
    """`graph` (a block) with each destination v's in-edges as row 2v and one edge to
    table row `index[v]` (v's own row; a block lists its destinations first among its
    sources) as row 2v + 1; source ids are table rows (kernel protocol, CPU; CSC for
    gradients to the table as `TableSources` derives it).

    Attributes:
        num_src_nodes: the table's rows.
        num_dst_nodes: twice the graph's destinations.
    """

    def __init__(self, graph, index: Tensor, table_rows: int) -> None:
        super().__init__(graph, index, table_rows)
        if graph.num_dst_nodes > graph.num_src_nodes:
            raise ValueError(f"RootedTableSources: the graph has {graph.num_dst_nodes} "
                             f"destinations but only {graph.num_src_nodes} sources; a "
                             f"destination's own row must be one of them")
        self.num_dst_nodes = 2 * graph.num_dst_nodes

    @property
    def num_edges(self) -> int:
        return self.graph.num_edges + self.graph.num_dst_nodes

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """(rowptr [2 Nd + 1], col [E + Nd] table rows, edge order [E + Nd])."""
        key = ("csr", index_dtype)
        if key not in self._cache:
            rowptr, col, _ = self.graph.csr(index_dtype)
            rooted_rowptr = torch.empty(self.num_dst_nodes + 1, dtype=index_dtype)
            rooted_col = torch.empty(self.num_edges, dtype=index_dtype)
            # the int64 index as it is: the kernel narrows each id it stores
            _interleave_roots(rowptr.contiguous().numpy(), col.contiguous().numpy(),
                              self.index.numpy(), rooted_rowptr.numpy(), rooted_col.numpy())
            order = torch.arange(self.num_edges, dtype=index_dtype)
            self._cache[key] = (rooted_rowptr, rooted_col, order)
        return self._cache[key]

    def coo(self) -> tuple[Tensor, Tensor]:
        """(src table rows, dst rows), both [E + Nd] int64, in CSR order."""
        if "coo" not in self._cache:
            rowptr, col, _ = self.csr(torch.int64)
            rows = torch.arange(self.num_dst_nodes, dtype=torch.int64)
            self._cache["coo"] = (col, rows.repeat_interleave(rowptr.diff()))
        return self._cache["coo"]


@numba.njit(cache=True, nogil=True)
def _interleave_roots(rowptr: np.ndarray, col: np.ndarray, index: np.ndarray,
                      rooted_rowptr: np.ndarray, rooted_col: np.ndarray) -> None:
    """Row 2v: index[col[j]] for v's in-edges j; row 2v + 1: index[v]."""
    position = 0
    for v in range(rowptr.shape[0] - 1):
        rooted_rowptr[2 * v] = position
        for j in range(rowptr[v], rowptr[v + 1]):
            rooted_col[position] = index[col[j]]
            position += 1
        rooted_rowptr[2 * v + 1] = position
        rooted_col[position] = index[v]
        position += 1
    rooted_rowptr[rooted_rowptr.shape[0] - 1] = position
