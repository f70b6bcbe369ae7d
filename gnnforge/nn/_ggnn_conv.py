"""The GGNN layer with typed edges (Li et al., ICLR 2016; Allamanis et al., ICLR 2018),
sparse or banded. PyG's untyped variant (one weight per step) is `GatedGraphConv`.

Each of T steps sends, along every edge u -> v of type p, the message ``W_p h_u + b_p``,
sums the messages arriving at v and updates ``h_v = GRU(m_v, h_v)``. The weights are
shared across steps (as in Li et al. and Allamanis et al.). The same parameters run on
either backend: a `Graph` (sparse, all edges) or `BandedBlocks` (three batched matmuls per
step; see `gnnforge.banded.propagate`), so a model trained banded can be evaluated on all
edges, as "Fast Training of Sparse Graph Neural Networks on Dense Hardware" does.

Message biases sum to ``in_degree_p(v) * b_p``, so both backends compute them as
``[N, P] @ [P, H]`` from per-type in-degrees, which keeps the propagation itself a pure
aggregate-then-transform product.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gnnforge.banded import BandedBlocks, propagate, sparse_propagate, typed_in_degree
from gnnforge.graph import Graph

__all__ = ["GGNNConv"]


class GGNNConv(nn.Module):
    """T steps of typed message passing with a GRU update.

    Args:
        hidden_channels: H, the state width. Inputs narrower than H are zero-padded.
        num_steps: T propagation steps (0 returns the padded input).
        num_edge_types: P relations, each with its own message weight and bias.
        bias: learn per-type message biases b_p.

    Shapes:
        input ``x``: [N, F] with F <= H (N = graph.num_nodes, or K*S slots when banded).
        output: [N, H].
    """

    def __init__(self, hidden_channels: int, num_steps: int, num_edge_types: int = 1,
                 bias: bool = True) -> None:
        super().__init__()
        checks = (("hidden_channels", hidden_channels, 1), ("num_steps", num_steps, 0),
                  ("num_edge_types", num_edge_types, 1))
        for name, value, least in checks:
            if not isinstance(value, int) or value < least:
                raise ValueError(f"GGNNConv: {name} must be an int >= {least}, got {value!r}")
        self.hidden_channels = hidden_channels
        self.num_steps = num_steps
        self.num_edge_types = num_edge_types
        self.weight = nn.Parameter(torch.empty(num_edge_types, hidden_channels, hidden_channels))
        self.bias = nn.Parameter(torch.empty(num_edge_types, hidden_channels)) if bias else None
        self.gru = nn.GRUCell(hidden_channels, hidden_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_channels)
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        self.gru.reset_parameters()

    def stacked_weight(self) -> Tensor:
        """[P*H, H]: the per-type weights stacked by type, as `propagate` takes them."""
        return self.weight.reshape(self.num_edge_types * self.hidden_channels, self.hidden_channels)

    def forward(self, x: Tensor, structure: Graph | BandedBlocks) -> Tensor:
        """Run T steps over `structure`: a Graph (sparse) or BandedBlocks (banded)."""
        h = self._pad_input(x, structure)
        if self.num_steps == 0:
            return h
        weight = self.stacked_weight()
        degree = self._in_degree(structure, h.dtype)
        bias = None if self.bias is None else degree @ self.bias  # [N, H], same every step
        for _ in range(self.num_steps):
            if isinstance(structure, BandedBlocks):
                message = propagate(structure, h, weight)
            else:
                message = sparse_propagate(structure, h, weight, self.num_edge_types)
            if bias is not None:
                message = message + bias
            h = self.gru(message, h)
        return h

    def _pad_input(self, x: Tensor, structure: Graph | BandedBlocks) -> Tensor:
        if isinstance(structure, BandedBlocks):
            nodes, types = structure.num_slots, structure.num_edge_types
        elif isinstance(structure, Graph):
            nodes, types = structure.num_nodes, self.num_edge_types
        else:
            raise TypeError("GGNNConv: structure must be a gnnforge.Graph or "
                            f"gnnforge.banded.BandedBlocks, got {type(structure).__name__}")
        if types != self.num_edge_types:
            raise ValueError(f"GGNNConv: blocks have {types} edge types, "
                             f"the layer {self.num_edge_types}")
        if x.dim() != 2 or x.shape[0] != nodes or x.shape[1] > self.hidden_channels:
            raise ValueError(f"GGNNConv: x must be [{nodes}, F<={self.hidden_channels}], "
                             f"got shape {tuple(x.shape)}")
        if x.shape[1] < self.hidden_channels:
            x = torch.cat([x, x.new_zeros(nodes, self.hidden_channels - x.shape[1])], dim=1)
        return x

    def _in_degree(self, structure: Graph | BandedBlocks, dtype: torch.dtype) -> Tensor:
        if isinstance(structure, BandedBlocks):
            return structure.in_degree.to(dtype)
        return typed_in_degree(structure, self.num_edge_types, dtype)

    def extra_repr(self) -> str:
        return (f"{self.hidden_channels}, num_steps={self.num_steps}, "
                f"num_edge_types={self.num_edge_types}, bias={self.bias is not None}")
