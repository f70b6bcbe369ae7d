"""Mostly-zero input features (bag-of-words, one-hot) kept sparse for the first layer.

Planetoid's inputs are row-normalised bag-of-words vectors with about 1% non-zeros
(Cora: 49k of 3.9M entries). Dense, the first layer's input dropout draws one Bernoulli
variate per entry and its projection multiplies every zero; sparse, dropout draws one per
non-zero (a dropped zero is still zero, so the distribution of the result is the same)
and the projection X W is a weighted aggregation over the non-zeros, which the kernels
of `gnnforge.ops` already compute with autograd: feature f is a source node, row n a
destination, X[n, f] the edge weight. Backward (dL/dW) is the same kernel on the
reversed structure.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnforge import ops
from gnnforge.graph import BipartiteGraph

__all__ = ["SparseFeatures"]


class SparseFeatures:
    """A [N, F] feature matrix stored as its non-zeros, row by row (CSR order).

    Build one with `SparseFeatures.from_dense(x)` once per dataset; `dropout` returns a
    new view with masked values (the structure, and its compressed formats, are shared).
    `GCNConv` and `SAGEConv` (mean and sum) accept it as x (the first layer of a model
    on bag-of-words inputs); `rows` gathers a sampled minibatch's input rows without
    densifying them; other code can project it with `matmul`.

    Attributes:
        structure: kernel-protocol view, feature f -> row n for every non-zero X[n, f].
        values: [nnz] float, X's non-zeros in row-major order (edge order of `structure`).
        shape: (N, F).
    """

    __slots__ = ("structure", "values", "shape")

    def __init__(self, structure: BipartiteGraph, values: Tensor, shape: tuple[int, int]) -> None:
        self.structure, self.values, self.shape = structure, values, shape

    @classmethod
    def from_dense(cls, x: Tensor) -> SparseFeatures:
        """The non-zeros of a 2-D floating tensor `x` ([N, F]).

        Raises:
            TypeError: when x is not a 2-D floating tensor.
        """
        if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
            got = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor)
                   else type(x).__name__)
            raise TypeError(f"SparseFeatures.from_dense: x must be a 2-D floating tensor, "
                            f"got {got}")
        rows, cols = torch.nonzero(x, as_tuple=True)  # row-major: edges sorted by destination
        structure = BipartiteGraph._trusted(cols, rows, x.shape[1], x.shape[0])
        return cls(structure, x[rows, cols], (int(x.shape[0]), int(x.shape[1])))

    @property
    def nnz(self) -> int:
        return int(self.values.numel())

    @property
    def density(self) -> float:
        return self.nnz / max(self.shape[0] * self.shape[1], 1)

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    def dropout(self, p: float, training: bool = True) -> SparseFeatures:
        """`torch.nn.functional.dropout` of the dense matrix, drawing only for non-zeros."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"SparseFeatures.dropout: p must lie in [0, 1], got {p}")
        if not training or p == 0.0:
            return self
        return SparseFeatures(self.structure, ops.dropout(self.values, p), self.shape)

    def rows(self, index: Tensor) -> SparseFeatures:
        """The [len(index), F] matrix of rows `index` (int64, any order, repeats allowed)."""
        index = torch.as_tensor(index, dtype=torch.int64)
        if index.dim() != 1:
            raise ValueError(f"SparseFeatures.rows: index must be 1-D, got shape "
                             f"{tuple(index.shape)}")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.shape[0]):
            raise ValueError(f"SparseFeatures.rows: index must lie in [0, {self.shape[0]}), got "
                             f"values in [{int(index.min())}, {int(index.max())}]")
        rowptr, _, edge_ids = self.structure.csr()
        starts, counts = rowptr[index], rowptr[index + 1] - rowptr[index]          # [n]
        new_rows = torch.repeat_interleave(torch.arange(index.numel()), counts)    # [nnz']
        first = torch.cumsum(counts, 0) - counts                                    # [n]
        positions = edge_ids[starts[new_rows] + torch.arange(new_rows.numel()) - first[new_rows]]
        src, _ = self.structure.coo()
        structure = BipartiteGraph._trusted(src[positions], new_rows, self.shape[1],
                                              index.numel())
        return SparseFeatures(structure, self.values[positions],
                              (int(index.numel()), self.shape[1]))

    def head(self, count: int) -> SparseFeatures:
        """The first `count` rows (a block's destinations are its first sources)."""
        if count == self.shape[0]:
            return self
        return self.rows(torch.arange(count))

    def matmul(self, other: Tensor) -> Tensor:
        """X @ other for `other` [F, O] (with autograd to `other`): [N, O]."""
        if other.dim() != 2 or other.shape[0] != self.shape[1]:
            raise ValueError(f"SparseFeatures.matmul: other must be [{self.shape[1]}, O], got "
                             f"{tuple(other.shape)}")
        if self.nnz == 0:  # an all-zero X: a zero product that still gives dL/dother = 0
            return other.new_zeros((self.shape[0], other.shape[0])) @ other
        return ops.u_mul_e_sum(self.structure, other, self.values.to(other.dtype)[:, None])

    def to_dense(self) -> Tensor:
        out = self.values.new_zeros(self.shape)
        src, dst = self.structure.coo()
        out[dst, src] = self.values
        return out

    def __repr__(self) -> str:
        return (f"SparseFeatures(shape={self.shape}, nnz={self.nnz}, "
                f"density={self.density:.4f})")
