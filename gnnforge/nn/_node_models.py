"""Node classifiers: a stack of SAGE, GCN or GAT layers over a full graph or sampled
blocks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge import ops
from gnnforge.nn._gcn_conv import GCNConv
from gnnforge.nn._indexed_rows import IndexedRows
from gnnforge.nn._sage_conv import SAGEConv
from gnnforge.nn._sparse_features import SparseFeatures

__all__ = ["NodeClassifier"]

_CONVS = ("sage", "gcn", "gat")
_ACTIVATIONS = {"relu": F.relu, "elu": F.elu}


def _make_conv(kind: str, width_in: int, width_out: int, aggr: str) -> nn.Module:
    if kind == "sage":
        return SAGEConv(width_in, width_out, aggr=aggr)
    return GCNConv(width_in, width_out)


def _gat_layers(widths: list[int], heads: int, output_heads: int,
                attention_dropout: float) -> nn.ModuleList:
    """Velickovic et al.'s stack: hidden layers concatenate `heads` heads of widths[i + 1]
    each; the output layer averages `output_heads` heads of num_classes."""
    from gnnforge.nn._gat_conv import GATConv

    layers, width_in = [], widths[0]
    for width_out in widths[1:-1]:
        layers.append(GATConv(width_in, width_out, heads=heads, dropout=attention_dropout))
        width_in = width_out * heads
    layers.append(GATConv(width_in, widths[-1], heads=output_heads, concat=False,
                          dropout=attention_dropout))
    return nn.ModuleList(layers)


class NodeClassifier(nn.Module):
    """L graph convolutions with an activation and dropout between them; logits per node.

    `forward(graph, x)` runs every layer on one (full) graph; `forward(blocks, x)` with a
    list of L sampler blocks runs layer l on blocks[l] (x then holds the input features of
    blocks[0]'s source nodes and the output has one row per destination of blocks[-1]).
    With `exchange` (cooperative minibatching, `CooperativeMinibatch.exchanges()`), x holds
    the rows this process owns, and before layer l `exchange[l]` turns the owned rows into
    the rows of blocks[l]'s sources. x may be `SparseFeatures` (mean/sum SAGE or GCN):
    the input dropout and the first projection then touch only its non-zeros. x may be
    `IndexedRows` (a sampled first layer's rows left in the feature table): a SAGE first
    layer aggregates them from the table when no input dropout applies (input_dropout 0,
    or eval); otherwise they are gathered first.

    `conv='gat'` is the GAT of Velickovic et al. (ICLR 2018): hidden layers concatenate
    `heads` attention heads of `hidden` features each, the output layer averages
    `output_heads` heads; `attention_dropout` drops attention coefficients. GAT layers
    take dense x only.

    Args:
        in_channels, hidden, num_classes: widths (GAT: `hidden` per head). num_layers: L >= 1.
        conv: 'sage', 'gcn' or 'gat'. aggr: SAGE aggregator. dropout: before every layer
            but the first. input_dropout: before the first (None: `dropout`; 0 in DGL's
            and PyG's ogbn-products examples, `dropout` in Kipf & Welling's GCN).
        activation: 'relu' or 'elu' (GAT's), between layers.
        heads, output_heads, attention_dropout: GAT only (see above).
    """

    def __init__(self, in_channels: int, hidden: int, num_classes: int, num_layers: int = 2,
                 conv: str = "sage", aggr: str = "mean", dropout: float = 0.5,
                 activation: str = "relu", heads: int = 1, output_heads: int = 1,
                 attention_dropout: float = 0.0, input_dropout: float | None = None) -> None:
        super().__init__()
        if conv not in _CONVS:
            raise ValueError(f"NodeClassifier: conv must be one of {_CONVS}, got {conv!r}")
        if num_layers < 1:
            raise ValueError(f"NodeClassifier: num_layers must be >= 1, got {num_layers}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"NodeClassifier: activation must be one of "
                             f"{tuple(_ACTIVATIONS)}, got {activation!r}")
        if conv != "gat" and (heads, output_heads, attention_dropout) != (1, 1, 0.0):
            raise ValueError(f"NodeClassifier: heads, output_heads and attention_dropout "
                             f"apply to conv='gat' only (got conv={conv!r})")
        widths = [in_channels] + [hidden] * (num_layers - 1) + [num_classes]
        if conv == "gat":
            self.convs = _gat_layers(widths, heads, output_heads, attention_dropout)
        else:
            self.convs = nn.ModuleList(_make_conv(conv, widths[i], widths[i + 1], aggr)
                                       for i in range(num_layers))
        self.dropout, self.activation = dropout, activation
        self.input_dropout = dropout if input_dropout is None else input_dropout

    def forward(self, graph: Any | Sequence[Any], x: Tensor | SparseFeatures | IndexedRows,
                exchange: Sequence[Callable[[Tensor], Tensor]] | None = None) -> Tensor:
        blocks = list(graph) if isinstance(graph, list | tuple) else [graph] * len(self.convs)
        if len(blocks) != len(self.convs):
            raise ValueError(f"NodeClassifier: got {len(blocks)} blocks for "
                             f"{len(self.convs)} layers")
        if exchange is not None and len(exchange) != len(self.convs):
            raise ValueError(f"NodeClassifier: got {len(exchange)} exchanges for "
                             f"{len(self.convs)} layers")
        # relu then the next layer's dropout in one pass (ops.relu_dropout), unless an
        # exchange runs between them (rows it duplicates must draw their own masks).
        fused = self.activation == "relu" and exchange is None
        for layer, (conv, block) in enumerate(zip(self.convs, blocks)):
            if isinstance(x, IndexedRows) and not self._reads_table(conv, exchange):
                x = x.materialize()
            if exchange is not None:
                x = exchange[layer](x)
            rate = self.input_dropout if layer == 0 else self.dropout
            if isinstance(x, SparseFeatures):
                x = x.dropout(rate, self.training)
            elif not isinstance(x, IndexedRows) and (layer == 0 or not fused):
                x = ops.dropout(x, rate, self.training)
            x = conv(block, x)
            if layer != len(self.convs) - 1:
                x = (ops.relu_dropout(x, self.dropout, self.training) if fused
                     else _ACTIVATIONS[self.activation](x))
        return x

    def _reads_table(self, conv: nn.Module, exchange: Any) -> bool:
        """Whether the first layer takes `IndexedRows` as they are: a SAGE layer, no
        exchange, and no input dropout to draw (its mask is per gathered row)."""
        dropping = self.training and self.input_dropout > 0
        return isinstance(conv, SAGEConv) and exchange is None and not dropping
