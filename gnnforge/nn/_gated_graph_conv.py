"""PyG's gated graph convolution (Li et al., "Gated Graph Sequence Neural Networks",
ICLR 2016, as `torch_geometric.nn.GatedGraphConv` implements it): one weight per step,
untyped edges, optional edge weights. The typed, banded GGNN of Allamanis et al. (one
weight per edge type, shared by every step) is `GGNNConv`."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from gnnforge import ops
from gnnforge.nn._aggregate import (check_aggr, check_node_input, edge_weight_of,
                                    reduce_neighbors)

__all__ = ["GatedGraphConv"]

_WEIGHTED = {"sum": ops.u_mul_e_sum, "add": ops.u_mul_e_sum, "mean": ops.u_mul_e_mean,
             "max": ops.u_mul_e_max}


class GatedGraphConv(nn.Module):
    r"""h^0 = x zero-padded to `out_channels`; for t < T:
    m^t_v = aggr_{u -> v} w_uv · (h^t_u W_t), h^{t+1} = GRU(m^t, h^t).

    Parameters and argument order are PyG's (`weight` [T, O, O], `rnn` a GRUCell), so
    `load_state_dict` works both ways. Edge types are ignored; for typed edges use
    `GGNNConv`.

    Args:
        out_channels: O, the state width; inputs narrower than O are zero-padded.
        num_layers: T propagation steps, each with its own weight.
        aggr: 'add' (PyG's default, also 'sum'), 'mean' or 'max'.
        bias: the GRU's biases.

    Shapes:
        x: [N, F] with F <= O on a square graph; edge_weight: [E] (default: the graph's
        edge_data["edge_weight"], else 1). returns: [N, O].
    """

    def __init__(self, out_channels: int, num_layers: int, aggr: str = "add",
                 bias: bool = True, *, num_edge_types: int | None = None) -> None:
        super().__init__()
        if num_edge_types is not None or not isinstance(aggr, str):
            raise TypeError(
                "GatedGraphConv now follows PyG: GatedGraphConv(out_channels, num_layers, "
                "aggr='add', bias=True), one weight per step, no edge types. The GGNN layer "
                "with one weight per edge type (the old GatedGraphConv(hidden, num_steps, "
                "num_edge_types), called as layer(x, graph)) is gnnforge.nn.GGNNConv")
        for name, value, least in (("out_channels", out_channels, 1),
                                   ("num_layers", num_layers, 0)):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"GatedGraphConv: {name} must be an int >= {least}, "
                                 f"got {value!r}")
        self.out_channels, self.num_layers = out_channels, num_layers
        self.aggr = check_aggr("GatedGraphConv", aggr)
        self.weight = nn.Parameter(torch.empty(num_layers, out_channels, out_channels))
        self.rnn = nn.GRUCell(out_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.out_channels)   # PyG's uniform(out_channels, weight)
        nn.init.uniform_(self.weight, -bound, bound)
        self.rnn.reset_parameters()

    def forward(self, graph: Any, x: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        if isinstance(graph, Tensor):
            raise TypeError("GatedGraphConv takes the graph first, layer(graph, x); the GGNN "
                            "layer called as layer(x, graph) or layer(x, blocks) is "
                            "gnnforge.nn.GGNNConv")
        check_node_input("GatedGraphConv", graph, x)
        if graph.num_src_nodes != graph.num_dst_nodes:
            raise ValueError("GatedGraphConv runs several steps on one node set, so it needs a "
                             f"square graph; got {graph.num_src_nodes} sources and "
                             f"{graph.num_dst_nodes} destinations")
        if x.shape[1] > self.out_channels:
            raise ValueError(f"GatedGraphConv: x has {x.shape[1]} columns, more than "
                             f"out_channels={self.out_channels}")
        weight = edge_weight_of("GatedGraphConv", graph, edge_weight)
        if x.shape[1] < self.out_channels:
            x = torch.cat([x, x.new_zeros(x.shape[0], self.out_channels - x.shape[1])], dim=1)
        for step in range(self.num_layers):
            message = x @ self.weight[step]                                   # [N, O]
            if weight is None:
                message = reduce_neighbors(graph, message, self.aggr)
            else:
                message = _WEIGHTED[self.aggr](graph, message, weight.to(x.dtype)[:, None])
            x = self.rnn(message, x)
        return x

    def extra_repr(self) -> str:
        return f"{self.out_channels}, num_layers={self.num_layers}, aggr={self.aggr!r}"
