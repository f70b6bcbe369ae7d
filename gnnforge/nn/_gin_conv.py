"""Graph isomorphism convolutions: GIN (Xu et al., "How Powerful are Graph Neural
Networks?", ICLR 2019) and GINE with edge features (Hu et al., "Strategies for
Pre-training Graph Neural Networks", ICLR 2020); equal to PyG's GINConv / GINEConv."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge.nn._aggregate import (check_aggr, check_node_input, dst_part, reduce_edges,
                                    reduce_neighbors)
from gnnforge.nn._gine_message import fused_gine_available, gine_message_sum
from gnnforge.nn._graph_structure import prepared_structure
from gnnforge.nn._planned import AUTO
from gnnforge.plan._auto import run_plan
from gnnforge.plan._execute import Structure
from gnnforge.plan._expressions import gin_expression
from gnnforge.plan._ir import Node
from gnnforge.plan._primitives import Composition

__all__ = ["GINConv", "GINEConv"]


class _GINBase(nn.Module):
    def __init__(self, mlp: nn.Module, eps: float, train_eps: bool) -> None:
        super().__init__()
        if not isinstance(mlp, nn.Module):
            raise TypeError(f"{type(self).__name__}: nn must be a torch.nn.Module, "
                            f"got {type(mlp).__name__}")
        self.nn = mlp
        self.initial_eps = eps
        if train_eps:
            self.eps = nn.Parameter(torch.tensor([float(eps)]))
        else:
            self.register_buffer("eps", torch.tensor([float(eps)]))

    def reset_parameters(self) -> None:
        for module in self.nn.modules():
            if module is not self.nn and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def _combine(self, graph: Any, x: Tensor, aggregated: Tensor) -> Tensor:
        return self.nn(aggregated + (1 + self.eps) * dst_part(graph, x))


class GINConv(_GINBase):
    r"""out_v = nn((1 + eps) · x_v + sum_{u -> v} x_u).

    When `nn` starts with a linear layer (`nn.Linear`, or a Sequential whose first module
    is one), that projection distributes over the sum: `plan` ("auto", the default,
    plans per graph and width; "default" or None is PyG's aggregate-then-project) may
    project first, (A (X W) + (1 + eps) X W), and aggregate the projected width.

    Args:
        nn: the update network applied to each node, e.g. an MLP F_in -> F_out.
        eps: initial epsilon.
        train_eps: learn epsilon (else a buffer).
        aggr: the neighbour reduction, 'add' (PyG's default, also 'sum'), 'mean' or 'max'.

    Shapes:
        x: [num_src_nodes, F_in]; returns [num_dst_nodes, F_out]. graph: Graph, GraphBatch
        (padding edges are loops on padding nodes, so real rows are unaffected) or a block.
    """

    def __init__(self, nn: nn.Module, eps: float = 0.0, train_eps: bool = False,
                 aggr: str = "add") -> None:
        super().__init__(nn, eps, train_eps)
        self.aggr = check_aggr("GINConv", aggr)
        self.plan: Composition | str | None = AUTO

    def _split(self) -> tuple[torch.nn.Linear, torch.nn.Module] | None:
        """(the first linear layer, the rest of nn), or None when nn starts otherwise."""
        if isinstance(self.nn, torch.nn.Linear):
            return self.nn, torch.nn.Identity()
        if (isinstance(self.nn, torch.nn.Sequential) and len(self.nn)
                and isinstance(self.nn[0], torch.nn.Linear)):
            return self.nn[0], self.nn[1:]
        return None

    def plan_expression(self) -> Node | None:
        """The expression up to nn's first linear layer (None: nothing to plan)."""
        split = self._split()
        if split is None or self.aggr not in ("add", "sum"):
            return None  # mean/max do not distribute over the projection the same way
        return gin_expression(split[0].bias is not None)

    def plan_symbols(self) -> dict[str, int]:
        linear = self._split()[0]
        return {"I": linear.in_features, "O": linear.out_features, "H": 1,
                "D": linear.out_features}

    def forward(self, graph: Any, x: Tensor) -> Tensor:
        check_node_input("GINConv", graph, x)
        split = self._split()
        if self.plan_expression() is None or x.dim() != 2:
            return self._combine(graph, x, reduce_neighbors(graph, x, self.aggr))
        linear, rest = split
        structure = prepared_structure(self, graph, False, Structure, key="plain")
        leaves = {"X": x, "W": linear.weight.t().unsqueeze(0),
                  "s": (1 + self.eps).reshape(1, 1, 1).to(x.dtype)}
        if linear.bias is not None:
            leaves["b"] = linear.bias.reshape(1, 1, -1)
        out = run_plan(self, self.plan_expression(), structure, leaves)    # [Nd, 1, O]
        return rest(out.reshape(graph.num_dst_nodes, linear.out_features))


class GINEConv(_GINBase):
    r"""out_v = nn((1 + eps) · x_v + sum_{e = (u, v)} relu(x_u + lin(edge_attr_e))).

    Args:
        nn: the update network.
        eps, train_eps: as in `GINConv`.
        edge_dim: width of `edge_attr` when it differs from F_in; a linear layer then maps
            it to F_in (PyG's `lin`). None: edge_attr must already be [E, F_in].

    Shapes:
        x: [num_src_nodes, F_in]; edge_attr: [E, edge_dim or F_in] in the graph's edge-id
        order; returns [num_dst_nodes, F_out].
    """

    def __init__(self, nn: nn.Module, eps: float = 0.0, train_eps: bool = False,
                 edge_dim: int | None = None, in_channels: int | None = None) -> None:
        super().__init__(nn, eps, train_eps)
        self.lin = None
        if edge_dim is not None:
            if in_channels is None:
                in_channels = _first_linear_width(nn)
            self.lin = torch.nn.Linear(edge_dim, in_channels)

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    def forward(self, graph: Any, x: Tensor, edge_attr: Tensor) -> Tensor:
        check_node_input("GINEConv", graph, x)
        if edge_attr.shape[0] != graph.num_edges:
            raise ValueError(f"GINEConv: edge_attr has {edge_attr.shape[0]} rows for "
                             f"{graph.num_edges} edges")
        if self.lin is not None:
            edge_attr = self.lin(edge_attr)
        if edge_attr.shape[-1] != x.shape[-1]:
            raise ValueError(f"GINEConv: edge_attr width {edge_attr.shape[-1]} differs from x "
                             f"width {x.shape[-1]}; pass edge_dim= to learn a projection")
        if fused_gine_available(x, edge_attr):
            # gather + add + ReLU + sum + (1 + eps) x_v in one kernel, no [E, F] tensors.
            return self.nn(gine_message_sum(graph, x, edge_attr, None, 1 + self.eps))
        src, _ = graph.coo()
        messages = F.relu(x.index_select(0, src) + edge_attr)
        return self._combine(graph, x, reduce_edges(graph, messages))


def _first_linear_width(module: nn.Module) -> int:
    if isinstance(module, nn.Linear):
        return module.in_features
    for child in module.modules():
        if isinstance(child, nn.Linear):
            return child.in_features
    raise ValueError("GINEConv: cannot infer in_channels from nn; pass in_channels=")
