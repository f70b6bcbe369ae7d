"""GIN for molecular property prediction, as in OGB's ogbg-mol* baselines (Hu et al.,
"Open Graph Benchmark", NeurIPS 2020): embedded integer atom/bond features, GINE layers
with a per-layer bond embedding, batch norm, and a pooled linear head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge.graph import GraphBatch
from gnnforge.nn._gin_conv import GINEConv
from gnnforge.nn._masked_batch_norm import MaskedBatchNorm1d

__all__ = ["FeatureEncoder", "MoleculeGIN"]

_POOLS = ("sum", "mean")


class FeatureEncoder(nn.Module):
    """Sum of one embedding per integer feature column (OGB's AtomEncoder/BondEncoder).

    Shapes:
        features: [N, C] int64 with column c in [0, vocabulary_sizes[c]); returns [N, D].
    """

    def __init__(self, vocabulary_sizes: Sequence[int], dim: int) -> None:
        super().__init__()
        self.vocabulary_sizes = tuple(int(v) for v in vocabulary_sizes)
        self.embeddings = nn.ModuleList(nn.Embedding(v, dim) for v in self.vocabulary_sizes)
        for embedding in self.embeddings:
            nn.init.xavier_uniform_(embedding.weight)
        offsets = torch.tensor((0, *self.vocabulary_sizes[:-1])).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)

    def forward(self, features: Tensor) -> Tensor:
        if features.dim() != 2 or features.shape[1] != len(self.embeddings):
            raise ValueError(f"FeatureEncoder: expected [N, {len(self.embeddings)}] int64 "
                             f"features, got {tuple(features.shape)} {features.dtype}")
        # One embedding_bag over the stacked tables equals the sum of the C lookups, in one
        # kernel forward and one backward instead of C of each.
        table = torch.cat([embedding.weight for embedding in self.embeddings])
        return F.embedding_bag(features + self.offsets, table, mode="sum")


class _MLP(nn.Module):
    """Linear(D, 2D) -> BN -> ReLU -> Linear(2D, D), batch norm over real rows only."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.lin1, self.norm, self.lin2 = nn.Linear(dim, 2 * dim), MaskedBatchNorm1d(2 * dim), \
            nn.Linear(2 * dim, dim)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.lin2(F.relu(self.norm(self.lin1(x), mask)))


class MoleculeGIN(nn.Module):
    """OGB-style GIN graph-property model over a (packed) `GraphBatch`.

    Per layer l: h = MLP_l(GINE_l(h, bond_l(edge_attr))), batch norm, ReLU (not after the
    last layer), dropout. Readout: sum or mean over each graph's real nodes, then a linear
    head. Padding nodes, edges and graphs (GraphBatch masks) never affect real outputs or
    batch-norm statistics.

    Args:
        atom_vocabulary, bond_vocabulary: vocabulary size of each integer feature column.
        hidden: width D. num_layers: L. num_tasks: outputs per graph.
        pool: 'sum' (suits additive targets such as TPSA) or 'mean' (OGB's default).
        dropout: dropout probability after each layer.

    Shapes:
        batch.node_data['x']: [N, 9] int64; batch.edge_data['edge_attr']: [E, 3] int64;
        returns [num_graphs, num_tasks] (rows of padding graphs are meaningless).
    """

    def __init__(self, atom_vocabulary: Sequence[int], bond_vocabulary: Sequence[int],
                 hidden: int = 64, num_layers: int = 3, num_tasks: int = 1,
                 pool: str = "sum", dropout: float = 0.0) -> None:
        super().__init__()
        if pool not in _POOLS:
            raise ValueError(f"MoleculeGIN: pool must be one of {_POOLS}, got {pool!r}")
        if num_layers < 1:
            raise ValueError(f"MoleculeGIN: num_layers must be >= 1, got {num_layers}")
        self.pool, self.dropout = pool, dropout
        self.atom_encoder = FeatureEncoder(atom_vocabulary, hidden)
        self.bond_encoders = nn.ModuleList(FeatureEncoder(bond_vocabulary, hidden)
                                           for _ in range(num_layers))
        self.convs = nn.ModuleList(GINEConv(nn.Identity(), train_eps=True)
                                   for _ in range(num_layers))
        self.mlps = nn.ModuleList(_MLP(hidden) for _ in range(num_layers))
        self.norms = nn.ModuleList(MaskedBatchNorm1d(hidden) for _ in range(num_layers))
        self.head = nn.Linear(hidden, num_tasks)

    def forward(self, batch: GraphBatch) -> Tensor:
        mask = batch.node_mask if isinstance(batch, GraphBatch) else None
        h = self.atom_encoder(batch.node_data["x"])
        edge_attr = batch.edge_data["edge_attr"]
        last = len(self.convs) - 1
        for layer, (conv, mlp, norm, bond) in enumerate(
                zip(self.convs, self.mlps, self.norms, self.bond_encoders)):
            h = norm(mlp(conv(batch, h, bond(edge_attr)), mask), mask)
            if layer != last:
                h = F.relu(h)
            h = F.dropout(h, self.dropout, self.training)
        return self.head(self._readout(batch, h))

    def _readout(self, batch: GraphBatch, h: Tensor) -> Tensor:
        num_graphs = batch.num_graphs if isinstance(batch, GraphBatch) else 1
        index = (batch.node_graph if isinstance(batch, GraphBatch)
                 else torch.zeros(h.shape[0], dtype=torch.int64, device=h.device))
        pooled = h.new_zeros(num_graphs, h.shape[1]).index_add_(0, index, h)   # [B, D]
        if self.pool == "mean":
            counts = torch.bincount(index, minlength=num_graphs).clamp(min=1)
            pooled = pooled / counts.to(h.dtype).unsqueeze(1)
        return pooled
