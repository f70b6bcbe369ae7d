"""`PackCollator`: padded GraphBatches of any subset of a dataset, built by gathers.

`GraphBatch.from_graphs(graphs).pad(...)` concatenates every graph's tensors in Python
at every step (a loop over ~100 graphs and a dozen `cat`s). Packing fixes the batch shape,
so the collator concatenates the whole dataset once, and a pack then costs one
`index_select` per tensor into the fixed-shape output: no per-graph Python work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from gnnforge import _device
from gnnforge.graph import Graph, GraphBatch

__all__ = ["PackCollator"]


class PackCollator:
    """Build `GraphBatch.from_graphs([graphs[i] for i in indices]).pad(*shape)` fast.

    Args:
        graphs: the dataset (Graphs with the same data keys, as `from_graphs` requires).
        shape: (num_nodes, num_edges, num_graphs) of every padded batch.

    Raises:
        GraphError: as `GraphBatch.from_graphs` when the graphs are incompatible.
    """

    def __init__(self, graphs: Sequence[Graph], shape: Sequence[int]) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.whole = GraphBatch.from_graphs(graphs)          # validated, concatenated once
        self.device = self.whole.device
        self._node_start = self.whole.graph_ptr[:-1].cpu().numpy()
        self._edge_start = self.whole.edge_ptr[:-1].cpu().numpy()
        sizes = self.whole.graph_sizes().cpu().numpy()
        self._nodes, self._edges = sizes[:, 0], sizes[:, 1]
        # The dataset's CSR by destination, once. Graph i's in-edge entries are exactly
        # the entries [edge_start[i], edge_start[i + 1]) (its nodes and edges are
        # contiguous), so a pack's CSR is a gather of the same rows as its edges.
        rowptr, self._csr_col, self._csr_eids = self.whole.csr()
        self._in_degree = torch.diff(rowptr)

    def __call__(self, indices: Sequence[int] | np.ndarray) -> GraphBatch:
        """The padded batch of graphs[indices] (in that order); equal to the slow path.

        Raises:
            ValueError: when the graphs do not fit the shape (as `GraphBatch.pad`).
        """
        index = np.asarray(indices, dtype=np.int64).reshape(-1)
        nodes, edges = self._nodes[index], self._edges[index]
        total_nodes, total_edges = int(nodes.sum()), int(edges.sum())
        num_nodes, num_edges, num_graphs = self.shape
        if num_nodes < total_nodes + 1 or num_edges < total_edges or num_graphs < index.size + 1:
            raise ValueError(
                f"pad: batch with {total_nodes} nodes, {total_edges} edges, {index.size} graphs "
                f"does not fit ({num_nodes}, {num_edges}, {num_graphs}); padding needs at least "
                "one extra node and one extra graph slot")
        node_ptr, node_rows = _ranges(self._node_start[index], nodes)
        edge_ptr, edge_rows = _ranges(self._edge_start[index], edges)
        # Each edge moves by (new node offset - old node offset) of its graph. The index
        # arrays are built on the host; to a GPU they go pinned and non-blocking.
        device = self.device
        move = lambda t: _device.to_device(t, device)  # noqa: E731
        node_rows, edge_rows = move(node_rows), move(edge_rows)
        shift = move(torch.from_numpy(np.repeat(node_ptr[:-1] - self._node_start[index],
                                                edges)))
        loop = torch.full((num_edges - total_edges,), total_nodes, dtype=torch.int64,
                          device=device)
        whole = self.whole
        union = Graph._trusted(
            torch.cat([whole.src.index_select(0, edge_rows) + shift, loop]),
            torch.cat([whole.dst.index_select(0, edge_rows) + shift, loop]), num_nodes,
            None if whole.edge_type is None else _gather(whole.edge_type, edge_rows, num_edges),
            {k: _gather(v, node_rows, num_nodes) for k, v in whole.node_data.items()},
            {k: _gather(v, edge_rows, num_edges) for k, v in whole.edge_data.items()},
            {k: _gather(v, move(torch.from_numpy(index)), num_graphs)
             for k, v in whole.graph_data.items()})
        pad_graphs = num_graphs - index.size
        graph_ptr = torch.from_numpy(np.concatenate([node_ptr, np.full(pad_graphs, num_nodes)]))
        edge_ptr_t = torch.from_numpy(np.concatenate([edge_ptr, np.full(pad_graphs, num_edges)]))
        graph_mask = torch.arange(num_graphs, device=device) < index.size
        graph_ptr, edge_ptr_t = move(graph_ptr), move(edge_ptr_t)
        batch = GraphBatch._make(union, graph_ptr, edge_ptr_t, graph_mask)
        renumber = move(torch.from_numpy(np.repeat(edge_ptr[:-1] - self._edge_start[index],
                                                   edges)))
        batch._cache[("csr", torch.int64)] = self._csr(node_rows, edge_rows, shift, renumber,
                                                       total_nodes, total_edges)
        return batch

    def _csr(self, node_rows: Tensor, edge_rows: Tensor, shift: Tensor, renumber: Tensor,
             total_nodes: int, total_edges: int) -> tuple[Tensor, Tensor, Tensor]:
        """The padded batch's CSR by destination, equal to `batch.csr()` (which sorts)."""
        num_nodes, num_edges, _ = self.shape
        degree = self._in_degree.new_zeros(num_nodes)
        degree[:total_nodes] = self._in_degree.index_select(0, node_rows)
        degree[total_nodes] = num_edges - total_edges       # the padding loops
        rowptr = degree.new_zeros(num_nodes + 1)
        torch.cumsum(degree, 0, out=rowptr[1:])
        loop = torch.full((num_edges - total_edges,), total_nodes, dtype=torch.int64,
                          device=self.device)
        col = torch.cat([self._csr_col.index_select(0, edge_rows) + shift, loop])
        eids = torch.cat([self._csr_eids.index_select(0, edge_rows) + renumber,
                          torch.arange(total_edges, num_edges, device=self.device)])
        return rowptr, col, eids


def _ranges(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, Tensor]:
    """(offsets [B+1], rows [sum counts]): rows = concat of arange(s, s + c) per graph."""
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rows = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], counts)
    return offsets, torch.from_numpy(rows)


def _gather(values: Tensor, rows: Tensor, size: int) -> Tensor:
    """[size, ...] values[rows] followed by zero rows."""
    out = values.new_zeros((size, *values.shape[1:]))
    torch.index_select(values, 0, rows, out=out[:rows.numel()])
    return out
