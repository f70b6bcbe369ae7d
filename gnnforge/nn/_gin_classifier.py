"""GIN-0 as Xu et al. evaluate it on the TU graph classification sets ("How Powerful are
Graph Neural Networks?", ICLR 2019, section 7), following their reference code
(github.com/weihua916/powerful-gnns, models/graphcnn.py): one-hot node labels in, L GIN
layers with eps fixed at 0, and a prediction from every layer's pooled representation,
the input's included, summed."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge import ops
from gnnforge._static_shapes import static_shapes
from gnnforge.graph import Graph, GraphBatch
from gnnforge.nn._gin_conv import GINConv
from gnnforge.nn._masked_batch_norm import MaskedBatchNorm1d
from gnnforge.nn._readout import mean_pool, sum_pool
from gnnforge.packing import StaticBatch

__all__ = ["GINClassifier"]

_POOLS = ("sum", "mean")
_BATCHES = (GraphBatch, StaticBatch)


class _MLP(nn.Module):
    """Linear(D_in, D) -> BN -> ReLU -> Linear(D, D): the reference code's 2-layer MLP,
    batch norm over real rows only."""

    def __init__(self, in_dim: int, dim: int) -> None:
        super().__init__()
        self.lin1, self.norm, self.lin2 = nn.Linear(in_dim, dim), MaskedBatchNorm1d(dim), \
            nn.Linear(dim, dim)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.lin2(F.relu(self.norm(self.lin1(x), mask)))


class GINClassifier(nn.Module):
    r"""Xu et al.'s GIN-0 graph classifier over a (packed) `GraphBatch`.

    h^0 = one_hot(x[:, 0]); for l = 1..L:
    h^l = ReLU(BN(MLP_l(h^{l-1}_v + sum_{u -> v} h^{l-1}_u)))   (GIN with eps = 0);
    scores = sum over l = 0..L of dropout(W_l · pool(h^l) + b_l), pool the sum (or mean)
    over each graph's real nodes. Dropout acts on each layer's class scores, where the
    reference code applies it (`F.dropout(self.linears_prediction[layer](pooled_h))`);
    the paper says "dropout after the dense layer".

    Padding nodes, edges and graphs never affect real outputs or batch-norm statistics.

    Args:
        num_node_labels: C, the vocabulary of the node label column x[:, 0].
        hidden: width D of every GIN layer. num_layers: L, GIN layers (the paper counts
            L + 1 layers, the input included: its 5 layers are L = 4).
        num_classes: scores per graph. pool: 'sum' (the paper's) or 'mean'.
        dropout: dropout probability on each layer's scores (the paper: 0 or 0.5).

    Shapes:
        batch.node_data['x']: [N, K] int64 with x[:, 0] in [0, C) (further columns are
        ignored); returns [num_graphs, num_classes] (rows of padding graphs are
        meaningless).

    Raises:
        ValueError: from the constructor on bad sizes; from forward when a label is
            outside [0, C).
    """

    def __init__(self, num_node_labels: int, hidden: int = 32, num_layers: int = 4,
                 num_classes: int = 2, pool: str = "sum", dropout: float = 0.5) -> None:
        super().__init__()
        for name, value, least in (("num_node_labels", num_node_labels, 1),
                                   ("hidden", hidden, 1), ("num_layers", num_layers, 1),
                                   ("num_classes", num_classes, 1)):
            if value < least:
                raise ValueError(f"GINClassifier: {name} must be >= {least}, got {value}")
        if pool not in _POOLS:
            raise ValueError(f"GINClassifier: pool must be one of {_POOLS}, got {pool!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GINClassifier: dropout must lie in [0, 1), got {dropout}")
        self.num_node_labels, self.pool, self.dropout = num_node_labels, pool, dropout
        widths = [num_node_labels] + [hidden] * num_layers
        # eps fixed at 0 (a buffer): GIN-0, the paper's best variant on these sets.
        self.convs = nn.ModuleList(GINConv(nn.Identity(), eps=0.0, train_eps=False)
                                   for _ in range(num_layers))
        self.mlps = nn.ModuleList(_MLP(widths[layer], hidden) for layer in range(num_layers))
        self.norms = nn.ModuleList(MaskedBatchNorm1d(hidden) for _ in range(num_layers))
        self.heads = nn.ModuleList(nn.Linear(width, num_classes) for width in widths)

    def forward(self, batch: Graph | GraphBatch | StaticBatch) -> Tensor:
        packed = isinstance(batch, _BATCHES)
        mask = batch.node_mask if packed else None                            # [N] or None
        h = self.one_hot(batch.node_data["x"])                                # [N, C]
        layers = [h]
        for conv, mlp, norm in zip(self.convs, self.mlps, self.norms):
            h = F.relu(norm(mlp(conv(batch, h), mask), mask))                 # [N, D]
            layers.append(h)
        if packed:
            node_graph, num_graphs = batch.node_graph, batch.num_graphs
        else:
            node_graph = torch.zeros(h.shape[0], dtype=torch.int64, device=h.device)
            num_graphs = 1
        readout = sum_pool if self.pool == "sum" else mean_pool
        scores = 0
        for head, layer in zip(self.heads, layers):
            pooled = readout(layer, node_graph, num_graphs, mask)             # [B, D_l]
            scores = scores + ops.dropout(head(pooled), self.dropout, self.training)
        return scores                                                          # [B, classes]

    def one_hot(self, x: Tensor) -> Tensor:
        """[N, C] float one-hot encoding of the label column x[:, 0]."""
        if x.dim() != 2 or x.shape[1] < 1 or x.dtype != torch.int64:
            raise ValueError(f"GINClassifier: expected node_data['x'] as [N, K >= 1] int64 "
                             f"with the node label in column 0, got {tuple(x.shape)} {x.dtype}")
        labels = x[:, 0]
        if static_shapes(x):  # a host read would break the trace: one_hot checks nothing
            return F.one_hot(labels.clamp(0, self.num_node_labels - 1),
                             self.num_node_labels).to(torch.get_default_dtype())
        bad = (labels < 0) | (labels >= self.num_node_labels)
        if labels.numel() and bool(bad.any()):
            row = int(torch.nonzero(bad)[0])
            raise ValueError(f"GINClassifier: node {row} has label {int(labels[row])}, outside "
                             f"[0, num_node_labels = {self.num_node_labels}) "
                             f"({int(bad.sum())} nodes out of range)")
        return F.one_hot(labels, self.num_node_labels).to(torch.get_default_dtype())

    def check_inputs(self, batch: GraphBatch | StaticBatch) -> None:
        """Raise ValueError naming the first node label outside [0, C) (for callers that
        run forward with static shapes, where it does not check)."""
        x = batch.node_data["x"]
        labels = x[:, 0] if x.dim() == 2 and x.shape[1] else x
        bad = (labels < 0) | (labels >= self.num_node_labels)
        if labels.numel() and bool(bad.any()):
            row = int(torch.nonzero(bad)[0])
            raise ValueError(f"GINClassifier: node {row} has label {int(labels[row])}, outside "
                             f"[0, num_node_labels = {self.num_node_labels})")
