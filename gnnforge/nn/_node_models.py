"""Node classifiers: a stack of SAGE (or GCN) layers over a full graph or sampled blocks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge.nn._gcn_conv import GCNConv
from gnnforge.nn._sage_conv import SAGEConv
from gnnforge.nn._sparse_features import SparseFeatures

__all__ = ["NodeClassifier"]

_CONVS = ("sage", "gcn")


def _make_conv(kind: str, width_in: int, width_out: int, aggr: str) -> nn.Module:
    if kind == "sage":
        return SAGEConv(width_in, width_out, aggr=aggr)
    return GCNConv(width_in, width_out)


class NodeClassifier(nn.Module):
    """L graph convolutions with ReLU and dropout between them; logits per node.

    `forward(graph, x)` runs every layer on one (full) graph; `forward(blocks, x)` with a
    list of L sampler blocks runs layer l on blocks[l] (x then holds the input features of
    blocks[0]'s source nodes and the output has one row per destination of blocks[-1]).
    With `exchange` (cooperative minibatching, `CooperativeMinibatch.exchanges()`), x holds
    the rows this process owns, and before layer l `exchange[l]` turns the owned rows into
    the rows of blocks[l]'s sources. x may be `SparseFeatures` (mean/sum SAGE or GCN):
    the input dropout and the first projection then touch only its non-zeros.

    Args:
        in_channels, hidden, num_classes: widths. num_layers: L >= 1.
        conv: 'sage' or 'gcn'. aggr: SAGE aggregator. dropout: between layers.
    """

    def __init__(self, in_channels: int, hidden: int, num_classes: int, num_layers: int = 2,
                 conv: str = "sage", aggr: str = "mean", dropout: float = 0.5) -> None:
        super().__init__()
        if conv not in _CONVS:
            raise ValueError(f"NodeClassifier: conv must be one of {_CONVS}, got {conv!r}")
        if num_layers < 1:
            raise ValueError(f"NodeClassifier: num_layers must be >= 1, got {num_layers}")
        widths = [in_channels] + [hidden] * (num_layers - 1) + [num_classes]
        self.convs = nn.ModuleList(_make_conv(conv, widths[i], widths[i + 1], aggr)
                                   for i in range(num_layers))
        self.dropout = dropout

    def forward(self, graph: Any | Sequence[Any], x: Tensor | SparseFeatures,
                exchange: Sequence[Callable[[Tensor], Tensor]] | None = None) -> Tensor:
        blocks = list(graph) if isinstance(graph, list | tuple) else [graph] * len(self.convs)
        if len(blocks) != len(self.convs):
            raise ValueError(f"NodeClassifier: got {len(blocks)} blocks for "
                             f"{len(self.convs)} layers")
        if exchange is not None and len(exchange) != len(self.convs):
            raise ValueError(f"NodeClassifier: got {len(exchange)} exchanges for "
                             f"{len(self.convs)} layers")
        for layer, (conv, block) in enumerate(zip(self.convs, blocks)):
            if exchange is not None:
                x = exchange[layer](x)
            x = (x.dropout(self.dropout, self.training) if isinstance(x, SparseFeatures)
                 else F.dropout(x, self.dropout, self.training))
            x = conv(block, x)
            if layer != len(self.convs) - 1:
                x = F.relu(x)
        return x
