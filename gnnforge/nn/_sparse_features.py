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
    `GCNConv` accepts it as x (the first layer of a GCN on bag-of-words inputs); other
    code can project it with `matmul`.

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
        structure = BipartiteGraph(cols, rows, x.shape[1], x.shape[0])
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
        if p == 1.0:
            return SparseFeatures(self.structure, torch.zeros_like(self.values), self.shape)
        keep = torch.empty_like(self.values).bernoulli_(1.0 - p)
        return SparseFeatures(self.structure, self.values * keep / (1.0 - p), self.shape)

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
