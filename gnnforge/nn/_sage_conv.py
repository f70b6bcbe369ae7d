"""GraphSAGE convolution (Hamilton et al., "Inductive Representation Learning on Large
Graphs", NeurIPS 2017), numerically equal to `torch_geometric.nn.SAGEConv`."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge import ops
from gnnforge.nn._aggregate import (check_aggr, check_graph_input, check_node_input, dst_part,
                                    reduce_neighbors)
from gnnforge.nn._graph_structure import prepared_structure
from gnnforge.nn._indexed_rows import IndexedRows, TableSources
from gnnforge.nn._planned import AUTO
from gnnforge.nn._rooted_sources import RootedTableSources
from gnnforge.nn._sparse_features import SparseFeatures
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import sage_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["SAGEConv"]


class SAGEConv(nn.Module):
    r"""out_v = W_l · aggr_{u -> v} x_u + b + W_r · x_v, optionally L2-normalised.

    With `project=True` (the paper's Eq. 3, PyG's option) the neighbours' features are
    first projected, x_u <- ReLU(W_p x_u + b_p) with `lin` [F_in, F_in], before they are
    aggregated; the root term W_r · x_v still reads the unprojected x_v, as in PyG.

    Parameters match PyG's: `lin_l` (with bias) acts on the aggregated neighbours, `lin_r`
    (no bias) on the node itself, so `load_state_dict` works in both directions.

    For the linear aggregators (mean, sum) the projection commutes with the aggregation:
    `plan` (a `gnnforge.plan` composition; "auto", the default, plans per graph and
    width; "default" or None is PyG's aggregate-then-project) may project first and
    aggregate the projected features instead (the bias is added afterwards, so nodes
    without in-edges still get exactly PyG's value). 'max' has one order only.

    x may be `SparseFeatures` for the mean and sum aggregators: both projections then run
    over the non-zeros (`SparseFeatures.matmul`), and the aggregation on the [N, F_out]
    projected rows.

    x may be `IndexedRows(table, index)` (a sampled first layer's input rows, not
    gathered): the aggregation then reads the table's rows directly and only the
    destinations' rows are gathered, aggregate then project, as PyG does with
    `table[index]`. On the CPU a mean or sum layer with its root term makes both terms one
    product over [aggr | root] rows, whose operand one reduction builds
    (`RootedTableSources`). With `project=True` the rows are gathered first.

    Args:
        in_channels: input width F_in.
        out_channels: output width F_out.
        aggr: 'mean', 'sum' (or PyG's 'add') or 'max' over in-neighbours (0 for a node
            with none).
        normalize: L2-normalise each output row.
        root_weight: add W_r · x_v.
        project: project the source features through `lin` and a ReLU before aggregating
            (a nonlinearity before the aggregation: nothing to re-associate, so such a
            layer is not planned and always aggregates then projects).
        bias: learn the additive bias of `lin_l`.

    Shapes:
        x: [num_src_nodes, F_in] float; graph: Graph, GraphBatch or sampler block.
        returns: [num_dst_nodes, F_out].
    """

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True) -> None:
        super().__init__()
        check_aggr("SAGEConv", aggr)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr, self.normalize, self.root_weight = aggr, normalize, root_weight
        self.project = project
        # PyG's parameter name; created first so the state dict lists it in PyG's order.
        self.lin = nn.Linear(in_channels, in_channels, bias=True) if project else None
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False) if root_weight else None
        self.plan: Composition | str | None = AUTO

    def reset_parameters(self) -> None:
        if self.lin is not None:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.lin_r is not None:
            self.lin_r.reset_parameters()

    def plan_expression(self) -> Node | None:
        """The layer's expression for the planner (None for 'max' or `project`: nothing
        to plan)."""
        if self.aggr == "max" or self.project:
            return None
        aggr = "sum" if self.aggr == "add" else self.aggr
        return sage_expression(aggr, self.lin_r is not None, self.lin_l.bias is not None)

    def plan_symbols(self) -> dict[str, int]:
        return {"I": self.in_channels, "O": self.out_channels, "H": 1, "D": self.out_channels}

    def forward(self, graph: Any, x: Tensor | SparseFeatures | IndexedRows) -> Tensor:
        if isinstance(x, IndexedRows):
            if not self.project:
                return self._indexed_forward(graph, x)
            x = x.materialize()
        if self.project:
            return self._projected_forward(graph, x)
        if isinstance(x, SparseFeatures):
            return self._sparse_forward(graph, x)
        check_node_input("SAGEConv", graph, x)
        # Traced (torch.compile): PyG's association, aggregate then project; the planner's
        # IR and measurements are Python the tracer cannot see through.
        if self.aggr == "max" or torch.compiler.is_compiling():
            out = self.lin_l(reduce_neighbors(graph, x, self.aggr))
            if self.lin_r is not None:
                out = out + self.lin_r(dst_part(graph, x))
        else:
            out = self._planned_forward(graph, x)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def _planned_forward(self, graph: Any, x: Tensor) -> Tensor:
        structure = prepared_structure(self, graph, False, Structure, key="plain")
        leaves = {"X": x, "Wl": self.lin_l.weight.t().unsqueeze(0)}
        if self.lin_l.bias is not None:
            leaves["bl"] = self.lin_l.bias.reshape(1, 1, -1)
        if self.lin_r is not None:
            leaves["Wr"] = self.lin_r.weight.t().unsqueeze(0)
        out = run_plan(self, self.plan_expression(), structure, leaves)     # [Nd, 1, O]
        return out.reshape(graph.num_dst_nodes, self.out_channels)

    def _projected_forward(self, graph: Any, x: Tensor | SparseFeatures) -> Tensor:
        """PyG's project=True: aggregate ReLU(lin(x_u)), add W_r · x_v of the raw x."""
        if isinstance(x, SparseFeatures):
            self._check_input_shape(graph, x)
            source = F.relu(x.matmul(self.lin.weight.t()) + self.lin.bias)   # [Ns, F_in]
            root = None if self.lin_r is None else \
                x.head(graph.num_dst_nodes).matmul(self.lin_r.weight.t())
        else:
            check_node_input("SAGEConv", graph, x)
            source = F.relu(self.lin(x))                                      # [Ns, F_in]
            root = None if self.lin_r is None else self.lin_r(dst_part(graph, x))
        out = self.lin_l(reduce_neighbors(graph, source, self.aggr))          # [Nd, F_out]
        if root is not None:
            out = out + root
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def _indexed_forward(self, graph: Any, x: IndexedRows) -> Tensor:
        """Aggregate the table's rows over the graph's edges, then project: one product
        over [aggr | root] rows where the layer has both (mean or sum, on the CPU)."""
        self._check_input_shape(graph, x)
        if self.aggr != "max" and self.lin_r is not None and x.table.device.type == "cpu":
            return self._joined_root_forward(graph, x)
        return self._split_root_forward(graph, x)

    def _split_root_forward(self, graph: Any, x: IndexedRows) -> Tensor:
        """W_l · aggr(x_u) + b (+ W_r · x_v, the destinations' rows gathered): a sum of
        products."""
        sources = TableSources(graph, x.index, x.table.shape[0])
        aggregated = reduce_neighbors(sources, x.table, self.aggr)          # [Nd, F_in]
        weight, bias = self.lin_l.weight, self.lin_l.bias
        start = bias.unsqueeze(0) if bias is not None else weight.new_zeros(1, weight.shape[0])
        more = [] if self.lin_r is None else \
            [(x.head(graph.num_dst_nodes), self.lin_r.weight.t())]
        out = ops.dense_product_plus(start, aggregated, weight.t(), more)     # [Nd, F_out]
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def _joined_root_forward(self, graph: Any, x: IndexedRows) -> Tensor:
        """One GEMM of [aggr(x_u) | x_v] against [W_l; W_r]: the operand is one reduction
        over the block with each destination's own row beside its in-edges
        (`RootedTableSources`)."""
        sources = RootedTableSources(graph, x.index, x.table.shape[0])
        joined = reduce_neighbors(sources, x.table, self.aggr)             # [2 Nd, F_in]
        joined = joined.reshape(graph.num_dst_nodes, 2 * self.in_channels)
        weight = torch.cat([self.lin_l.weight, self.lin_r.weight], 1).t()  # [2 F_in, F_out]
        bias = self.lin_l.bias
        start = bias.unsqueeze(0) if bias is not None else weight.new_zeros(1, weight.shape[1])
        out = ops.dense_product_plus(start, joined, weight)                 # [Nd, F_out]
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def _check_input_shape(self, graph: Any, x: SparseFeatures | IndexedRows) -> None:
        """ValueError unless x (not a tensor) has one [in_channels] row per source node."""
        check_graph_input("SAGEConv", graph)
        if x.shape != (graph.num_src_nodes, self.in_channels):
            raise ValueError(f"SAGEConv: x must have shape [num_src_nodes="
                             f"{graph.num_src_nodes}, {self.in_channels}], got "
                             f"{type(x).__name__} of shape {x.shape}")

    def _sparse_forward(self, graph: Any, x: SparseFeatures) -> Tensor:
        if self.aggr == "max":
            raise ValueError("SAGEConv: SparseFeatures input needs a linear aggregator (mean "
                             "or sum): max does not commute with the projection; pass "
                             "x.to_dense()")
        self._check_input_shape(graph, x)
        out = reduce_neighbors(graph, x.matmul(self.lin_l.weight.t()), self.aggr)
        if self.lin_l.bias is not None:
            out = out + self.lin_l.bias
        if self.lin_r is not None:
            out = out + x.head(graph.num_dst_nodes).matmul(self.lin_r.weight.t())
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, aggr={self.aggr!r}"
                + (", project=True" if self.project else ""))
