"""Input rows of a sampled minibatch left in their feature table, for the first layer.

A sampled minibatch's first layer reads about ten times more source rows than it has
destinations: on the products-sized graph (fanouts [15, 10, 5], batch 1024) 581k source
rows of 100 floats (232 MB) for 58.5k destinations. Gathering them into a new matrix and
then aggregating it reads every row twice and writes it once; a mean or sum over the
block's edges can read the table's rows directly, through a view of the block whose
source ids are table rows (`TableSources`), and only the destinations' rows (the root
term) are gathered. One step's layer-1 aggregation there: 80 -> 48 ms at one thread, 42 ->
26 ms at two (docs/training.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gnnforge import ops
from gnnforge.graph import BipartiteGraph

__all__ = ["IndexedRows", "TableSources"]


class IndexedRows:
    """The [len(index), F] rows `table[index]` of a feature table, not gathered.

    Pass it as the first layer's x where the layer takes it (`SAGEConv`, which aggregates
    straight from `table`); `materialize()` gathers it for any other code. `table` may be
    memory-mapped; when it requires grad (a learnt embedding), its gradient is dense, as
    `torch.nn.Embedding`'s.

    Attributes:
        table: [R, F] tensor of every row.
        index: [n] int32/int64 rows of `table`, any order, repeats allowed (a block's
            `src_nodes`).

    Raises:
        TypeError: when table is not a 2-D tensor or index not a 1-D integer tensor.
        ValueError: on different devices, or an index outside [0, R) (naming the first).
    """

    __slots__ = ("table", "index")

    def __init__(self, table: Tensor, index: Tensor) -> None:
        if not isinstance(table, Tensor) or table.dim() != 2:
            got = f"shape {tuple(table.shape)}" if isinstance(table, Tensor) else \
                type(table).__name__
            raise TypeError(f"IndexedRows: table must be a 2-D tensor, got {got}")
        if not isinstance(index, Tensor) or index.dim() != 1 or \
                index.dtype not in (torch.int32, torch.int64):
            got = (f"{index.dtype} tensor of shape {tuple(index.shape)}"
                   if isinstance(index, Tensor) else type(index).__name__)
            raise TypeError(f"IndexedRows: index must be a 1-D int32/int64 tensor, got {got}")
        if index.device != table.device:
            raise ValueError(f"IndexedRows: index is on {index.device} but table is on "
                             f"{table.device}")
        _check_rows(index, table.shape[0])
        self.table, self.index = table, index

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.index.numel()), int(self.table.shape[1])

    @property
    def dtype(self) -> torch.dtype:
        return self.table.dtype

    def head(self, count: int) -> Tensor:
        """[count, F] the first `count` rows, gathered (a block's destinations)."""
        return ops.gather_rows(self.table, self.index[:count])

    def materialize(self) -> Tensor:
        """[n, F] `table[index]` (`ops.gather_rows`)."""
        return ops.gather_rows(self.table, self.index)

    def __repr__(self) -> str:
        return f"IndexedRows(shape={self.shape}, table_rows={self.table.shape[0]})"


def _check_rows(index: Tensor, rows: int) -> None:
    # Two reductions, no [n] temporaries (581k ids a products step); the mask on failure.
    if index.numel() == 0 or (int(index.min()) >= 0 and int(index.max()) < rows):
        return
    position = int(((index < 0) | (index >= rows)).nonzero()[0])
    raise ValueError(f"IndexedRows: index[{position}] = {int(index[position])} is "
                     f"outside [0, {rows}) (the table's rows)")


class TableSources:
    """`graph` with each source u replaced by table row `index[u]` (kernel protocol).

    Aggregating table rows over it equals aggregating `table[index]` over `graph`. CSR
    and COO keep `graph`'s edge order; CSC (for gradients to the table) is derived on
    first use.
    """

    def __init__(self, graph: Any, index: Tensor, table_rows: int) -> None:
        if index.numel() != graph.num_src_nodes:
            raise ValueError(f"TableSources: index has {index.numel()} rows but the graph "
                             f"has {graph.num_src_nodes} source nodes")
        self.graph, self.index = graph, index.to(torch.int64)
        self.num_src_nodes, self.num_dst_nodes = int(table_rows), graph.num_dst_nodes
        self._cache: dict = {}

    @property
    def num_edges(self) -> int:
        return self.graph.num_edges

    def coo(self) -> tuple[Tensor, Tensor]:
        if "coo" not in self._cache:
            src, dst = self.graph.coo()
            self._cache["coo"] = (self.index.index_select(0, src), dst)
        return self._cache["coo"]

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """(rowptr [num_dst+1], col [E] table rows, edge_ids [E]) by destination."""
        key = ("csr", index_dtype)
        if key not in self._cache:
            # index_select, not index[col]: 2.0 against 7.7 ms for a products-sized block's
            # 875k edges (one thread), and the narrow index is converted before, not after.
            rowptr, col, edge_ids = self.graph.csr(index_dtype)
            self._cache[key] = (rowptr, self.index.to(index_dtype).index_select(0, col),
                                edge_ids)
        return self._cache[key]

    def csc(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """(colptr [table rows+1], row [E] destinations, edge_ids [E]) by table row."""
        if "bipartite" not in self._cache:
            src, dst = self.coo()
            self._cache["bipartite"] = BipartiteGraph._trusted(
                src, dst, self.num_src_nodes, self.num_dst_nodes)
        return self._cache["bipartite"].csc(index_dtype)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_src_nodes={self.num_src_nodes}, "
                f"num_dst_nodes={self.num_dst_nodes}, num_edges={self.num_edges})")
