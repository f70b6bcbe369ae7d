"""GIN for molecular property prediction, as in OGB's ogbg-mol* baselines (Hu et al.,
"Open Graph Benchmark", NeurIPS 2020): embedded integer atom/bond features, GINE layers
with a per-layer bond embedding, batch norm, and a pooled linear head."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnnforge import ops
from gnnforge._static_shapes import static_shapes
from gnnforge.graph import GraphBatch
from gnnforge.nn._bag_sum import bag_sum
from gnnforge.nn._embedding_sum import embedding_sum, embedding_sum_available
from gnnforge.nn._gin_conv import GINEConv
from gnnforge.nn._gine_message import fused_gine_available, gine_message_sum
from gnnforge.nn._masked_batch_norm import MaskedBatchNorm1d, _prefix_length
from gnnforge.packing import StaticBatch

__all__ = ["FeatureEncoder", "MoleculeGIN"]

_POOLS = ("sum", "mean")
_BATCHES = (GraphBatch, StaticBatch)


# Up to this many value combinations, a FeatureEncoder embeds every combination once per
# call and rows index that table (bonds: 5 * 6 * 2 = 60 combinations).
_MAX_COMBINATIONS = 4096
# Below this many combinations a row has an int64 mixed-radix code (atoms: ~1.5e8).
_MAX_CODE = 2**62


class FeatureEncoder(nn.Module):
    """Sum of one embedding per integer feature column (OGB's AtomEncoder/BondEncoder).

    Exact ways to the same sum, picked by vocabulary size and device. Few combinations
    (bond features): embed all combinations once ([K, D], K <= 4096) and gather each row's
    combination, so backward accumulates into K rows instead of sorting N * C indices.
    Otherwise (atom features), on CPU float tables, the `embedding_sum` kernel sums each
    row's C table rows, and its backward accumulates without sorting. Elsewhere the
    distinct rows of the batch are embedded once with `embedding_bag` over the stacked
    tables and each row gathers its distinct row's sum; with static shapes (traced, or
    XLA: `gnnforge._static_shapes`), or above 2**62 combinations (no int64 row code), one
    bag over all N rows (`bag_sum`: a gather and a sum on XLA, which cannot lower
    `embedding_bag`).

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
        self.register_buffer("sizes", torch.tensor(self.vocabulary_sizes), persistent=False)
        self.register_buffer("combinations", None, persistent=False)
        self.register_buffer("strides", None, persistent=False)
        if math.prod(self.vocabulary_sizes) < _MAX_CODE:
            # Mixed-radix code of a row: sum_c features[:, c] * strides[c] (unique per row).
            self.register_buffer("strides", torch.tensor(
                [math.prod(self.vocabulary_sizes[c + 1:])
                 for c in range(len(self.vocabulary_sizes))]), persistent=False)
        if math.prod(self.vocabulary_sizes) <= _MAX_COMBINATIONS:
            grid = torch.cartesian_prod(*(torch.arange(v) for v in self.vocabulary_sizes))
            self.register_buffer("combinations", grid.reshape(-1, len(self.vocabulary_sizes))
                                 + offsets, persistent=False)             # [K, C] table rows

    def accepts(self, features: Tensor) -> bool:
        """True when `features` is [N, C] with this encoder's C columns."""
        return features.dim() == 2 and features.shape[1] == len(self.embeddings)

    def forward(self, features: Tensor) -> Tensor:
        if not self.accepts(features):
            raise ValueError(f"FeatureEncoder: expected [N, {len(self.embeddings)}] int64 "
                             f"features, got {tuple(features.shape)} {features.dtype}")
        return self.embed(features, self.table())

    def table(self) -> Tensor:
        """[sum of vocabulary sizes, D] the column tables stacked."""
        return torch.cat([embedding.weight for embedding in self.embeddings])

    def embed(self, features: Tensor, table: Tensor) -> Tensor:
        """[N, W] sum over columns c of table[offsets[c] + features[:, c]] for any [V, W].

        Raises:
            ValueError: when a feature value is outside its column's vocabulary (not with
                static shapes, where the check would read the host: the caller checks
                once, `check_inputs`).
        """
        if not static_shapes(features, table):
            self._check_range(features)
        if self.combinations is not None:
            every = bag_sum(self.combinations, table)                           # [K, W]
            return every.index_select(0, features @ self.strides)
        if embedding_sum_available(features, table):
            # Sum of the C rows in one pass, backward without embedding_bag's index sort
            # (a quarter of embedding_bag's time, half of the distinct-row path's), on
            # every row: no data-dependent shape, so torch.compile takes it as well.
            return embedding_sum(features + self.offsets, table)               # [N, W]
        if (self.strides is not None and features.shape[0] > 0
                and not static_shapes(features, table)):  # unique's size depends on the data
            # Molecules repeat few distinct atom rows: embed each distinct row once, then
            # gather; backward sums N gradient rows into U, and the bag backward sees U * C.
            distinct, inverse = torch.unique(features @ self.strides, return_inverse=True)
            rows = torch.div(distinct.unsqueeze(1), self.strides,
                             rounding_mode="floor") % self.sizes               # [U, C]
            every = F.embedding_bag(rows + self.offsets, table, mode="sum")    # [U, W]
            return every.index_select(0, inverse)
        # One bag of C rows per input row: no [N, C, W] intermediate in forward or backward.
        return bag_sum(features + self.offsets, table)                         # [N, W]

    def _check_range(self, features: Tensor) -> None:
        bad = (features < 0) | (features >= self.sizes)
        if features.numel() and bool(bad.any()):
            row, column = (int(i) for i in torch.nonzero(bad)[0])
            raise ValueError(f"FeatureEncoder: features[{row}, {column}] = "
                             f"{int(features[row, column])} is outside column {column}'s "
                             f"vocabulary [0, {self.vocabulary_sizes[column]}) "
                             f"({int(bad.any(1).sum())} rows out of range)")


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

    def forward(self, batch: GraphBatch | StaticBatch) -> Tensor:
        mask = batch.node_mask if isinstance(batch, _BATCHES) else None
        x, edge_attr = batch.node_data["x"], batch.edge_data["edge_attr"]
        tables = self._bond_tables(edge_attr)
        graph = batch
        # Static shapes (torch.compile, XLA): every layer runs masked over the whole padded
        # pack, so the step has the pack's fixed shapes and no data-dependent slicing.
        real = (None if tables is None or mask is None or static_shapes(x)
                else _real_prefix(batch, mask))
        if real is not None:
            # Packed batches put padding nodes last and padding edges only between them:
            # run every layer on the real rows (plain batch norm, no padding work).
            graph, x, mask = _RealPrefix(batch, real), x[:real], None
        h = self.atom_encoder(x)
        bonds = self._bond_embeddings(edge_attr) if tables is None else tables[0]
        last = len(self.convs) - 1
        for layer, (conv, mlp, norm, bond) in enumerate(
                zip(self.convs, self.mlps, self.norms, bonds)):
            if tables is None:
                h = conv(graph, h, bond)
            else:   # bond is this layer's [K, D] table of every bond-feature combination
                h = conv.nn(gine_message_sum(graph, h, bond, tables[1], 1 + conv.eps))
            h = norm(mlp(h, mask), mask)
            if layer != last:
                h = F.relu(h)
            h = ops.dropout(h, self.dropout, self.training)
        return self.head(self._readout(batch, h))

    def _bond_tables(self, edge_attr: Tensor):
        """(per-layer [K, D] tables of all K bond-feature combinations, [E] combination of
        each edge), or None when the fused GINE kernel does not apply (then
        `_bond_embeddings` expands the embeddings to [E, D] per layer)."""
        first = self.bond_encoders[0]
        if first.combinations is None or not first.accepts(edge_attr):
            return None
        table = torch.cat([encoder.table() for encoder in self.bond_encoders], dim=1)
        if not fused_gine_available(table, table):  # the bag's result has table's kind
            return None
        every = bag_sum(first.combinations, table)                             # [K, L*D]
        if not static_shapes(edge_attr):  # traced: the caller checks (`check_inputs`)
            first._check_range(edge_attr)
        return every.split(every.shape[1] // len(self.bond_encoders), dim=1), \
            edge_attr @ first.strides

    def _bond_embeddings(self, edge_attr: Tensor) -> tuple[Tensor, ...]:
        """Every layer's bond embedding [E, D] from one lookup in the tables side by side.

        Equal to `[bond(edge_attr) for bond in self.bond_encoders]`: the layers index the
        same rows, so one embedding_bag over [V, L*D] replaces L lookups (and L index sorts
        in backward).
        """
        first = self.bond_encoders[0]
        if first.accepts(edge_attr):
            table = torch.cat([encoder.table() for encoder in self.bond_encoders], dim=1)
            joined = first.embed(edge_attr, table)                              # [E, L*D]
            return joined.split(table.shape[1] // len(self.bond_encoders), dim=1)
        return tuple(bond(edge_attr) for bond in self.bond_encoders)  # raises the message

    def check_inputs(self, batch: GraphBatch | StaticBatch) -> None:
        """Raise ValueError naming the first atom or bond feature outside its vocabulary.

        forward checks this itself, except with static shapes (torch.compile, XLA), where
        a data-dependent error would break the graph or read the host every step: there
        the caller checks once (`gnnforge train --compile` and `--device xla` check the
        whole CPU dataset before the first step).
        """
        self.atom_encoder._check_range(batch.node_data["x"])
        edge_attr = batch.edge_data["edge_attr"]
        if self.bond_encoders[0].accepts(edge_attr):
            self.bond_encoders[0]._check_range(edge_attr)

    def _readout(self, batch: GraphBatch | StaticBatch, h: Tensor) -> Tensor:
        packed = isinstance(batch, _BATCHES)
        num_graphs = batch.num_graphs if packed else 1
        index = (batch.node_graph[:h.shape[0]] if packed
                 else torch.zeros(h.shape[0], dtype=torch.int64, device=h.device))
        pooled = h.new_zeros(num_graphs, h.shape[1]).index_add_(0, index, h)   # [B, D]
        if self.pool == "mean":  # node counts by index_add: bincount's size is data-dependent
            counts = h.new_zeros(num_graphs).index_add_(0, index, h.new_ones(h.shape[0]))
            pooled = pooled / counts.clamp(min=1).unsqueeze(1)
        return pooled


def _real_prefix(batch: GraphBatch, mask: Tensor) -> int | None:
    """k when nodes [0, k) are the real ones and no edge into them leaves that prefix."""
    real = _prefix_length(mask)
    if real is None:
        return None
    rowptr, col, _ = batch.csr()
    return None if bool((col[:int(rowptr[real])] >= real).any()) else real


class _RealPrefix:
    """The real nodes [0, real) of a packed batch whose padding nodes come last, for the
    CSR kernel protocol: their in-edges all start at real nodes (padding edges are loops
    on a padding node), so the first `real` CSR rows are the real subgraph."""

    def __init__(self, batch: GraphBatch, real: int) -> None:
        self.batch, self.num_src_nodes, self.num_dst_nodes = batch, real, real
        self.num_edges = batch.num_edges

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        rowptr, col, edge_ids = self.batch.csr(index_dtype)
        return rowptr[:self.num_dst_nodes + 1], col, edge_ids

    def csc(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        # Real nodes' out-edges end at real nodes too (padding edges are padding loops).
        colptr, row, edge_ids = self.batch.csc(index_dtype)
        return colptr[:self.num_src_nodes + 1], row, edge_ids
