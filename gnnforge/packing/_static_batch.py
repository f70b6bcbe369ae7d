"""`StaticBatch`: a padded GraphBatch as plain fixed-shape tensors, what a compiled step takes.

torch.compile guards on everything a traced function reads. A `GraphBatch` computes its
CSR, CSC and node-to-graph map lazily into a cache dict; tracing that would mutate the
input (a recompile at the next step) and put data-dependent sizes in the graph. A
StaticBatch is built eagerly, once per step outside the compiled region, with every array
the kernels and readouts need already computed: inside the step there is nothing left
to compute from data, only tensors whose shapes the pack fixes. It has the kernel protocol
(`num_src_nodes`, `num_dst_nodes`, `num_edges`, `coo()`, `csr()`, `csc()`), so every
layer and op accepts it as it accepts a Graph.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from gnnforge._device import to_device
from gnnforge.graph import GraphBatch

__all__ = ["StaticBatch"]


@dataclass(frozen=True, eq=False)
class StaticBatch:
    """One padded batch, every tensor precomputed.

    Attributes:
        rowptr, col, eids: CSR by destination ([N+1], [E], [E]) in `index_dtype`.
        colptr, row, ceids: CSC by source ([N+1], [E], [E]) in `index_dtype`.
        src, dst: [E] int64 COO in edge-id order.
        node_graph: [N] int64 graph slot of each node.
        node_mask: [N] bool, False on padding nodes.
        graph_mask: [B] bool, False on padding graph slots.
        node_data, edge_data, graph_data: the batch's feature dicts.
    """

    rowptr: Tensor
    col: Tensor
    eids: Tensor
    colptr: Tensor
    row: Tensor
    ceids: Tensor
    src: Tensor
    dst: Tensor
    node_graph: Tensor
    node_mask: Tensor
    graph_mask: Tensor
    node_data: dict[str, Tensor]
    edge_data: dict[str, Tensor]
    graph_data: dict[str, Tensor]

    @classmethod
    def from_batch(cls, batch: GraphBatch, index_dtype: torch.dtype | None = None
                   ) -> StaticBatch:
        """Every array of `batch` computed now (CSR/CSC int32 when they fit, by default).

        Raises:
            TypeError: when `batch` is not a GraphBatch.
        """
        if not isinstance(batch, GraphBatch):
            raise TypeError(f"StaticBatch.from_batch: expected a GraphBatch, got "
                            f"{type(batch).__name__}")
        if index_dtype is None:
            largest = max(batch.num_nodes, batch.num_edges)
            index_dtype = torch.int32 if largest < 2**31 - 1 else torch.int64
        return cls(*batch.csr(index_dtype), *batch.csc(index_dtype), batch.src, batch.dst,
                   batch.node_graph, batch.node_mask, batch.graph_mask,
                   dict(batch.node_data), dict(batch.edge_data), dict(batch.graph_data))

    # ------------------------------------------------------------------ kernel protocol

    @property
    def num_nodes(self) -> int:
        return self.rowptr.shape[0] - 1

    num_src_nodes = num_dst_nodes = num_nodes

    @property
    def num_edges(self) -> int:
        return self.col.shape[0]

    @property
    def num_graphs(self) -> int:
        """Graph slots, padding included."""
        return self.graph_mask.shape[0]

    @property
    def device(self) -> torch.device:
        return self.src.device

    def coo(self) -> tuple[Tensor, Tensor]:
        return self.src, self.dst

    def csr(self, index_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor, Tensor]:
        return _as(index_dtype, self.rowptr, self.col, self.eids)

    def csc(self, index_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor, Tensor]:
        return _as(index_dtype, self.colptr, self.row, self.ceids)

    # ------------------------------------------------------------------ moving

    def to(self, device: torch.device | str) -> StaticBatch:
        """The same batch on `device`; CPU to GPU through pinned memory, non-blocking."""
        device = torch.device(device)
        return self._map(lambda t: to_device(t, device))

    def pin_memory(self) -> StaticBatch:
        """Every tensor in page-locked memory, for asynchronous copies to a GPU."""
        return self._map(lambda t: t.pin_memory())

    def _map(self, function) -> StaticBatch:
        values = []
        for field in fields(self):
            value = getattr(self, field.name)
            values.append({k: function(v) for k, v in value.items()} if isinstance(value, dict)
                          else function(value))
        return type(self)(*values)


def _as(index_dtype: torch.dtype | None, *arrays: Tensor) -> tuple[Tensor, ...]:
    if index_dtype is None or arrays[0].dtype == index_dtype:
        return arrays
    return tuple(array.to(index_dtype) for array in arrays)
