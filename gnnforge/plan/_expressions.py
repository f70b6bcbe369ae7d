"""Layer expressions: each layer's default tree, spelled in the IR as PyG computes it.

The default is the association PyG uses (and DGL for attention layers), so the default
plan is what a user of those libraries gets; every other plan is reached from it by the
rewrite table. Symbols: Nd/Ns destination/source rows, I/O input/output width, H heads,
D per-head width; R relations, B bases, Ib the input width of one block of a
block-diagonal weight (I / number of blocks).
"""

from __future__ import annotations

from functools import cache

from gnnforge.plan._ir import (Node, add, affine, attention, attention_v2, dst_rows, hsum,
                               leaf, matmul, mix, scale)

__all__ = ["gat_expression", "gatv2_expression", "gcn_expression", "gin_expression",
           "rgcn_expression", "sage_expression", "sgc_expression", "tag_expression"]

_X = leaf("X", "dense", (1, "Ns", "I"))
_NORMADJ = leaf("Â", "normadj", (1, "Nd", "Ns"))
_ADJ = leaf("A", "adjacency", (1, "Nd", "Ns"))


@cache
def gcn_expression() -> Node:
    """Kipf & Welling: Â (X W), the projection first as in PyG's GCNConv."""
    return matmul(_NORMADJ, matmul(_X, leaf("W", "weight", (1, "I", "O"))))


def _square_normadj_power(k: int, x: Node) -> Node:
    # Powers need a square Â (Nd == Ns); SGC and TAGCN run on full graphs only.
    normadj = leaf("Â", "normadj", (1, "Ns", "Ns"))
    for _ in range(k):
        x = matmul(normadj, x)
    return x


@cache
def sgc_expression(k: int) -> Node:
    """Wu et al.: (Â^K X) W, propagation first as in PyG's SGConv."""
    return matmul(_square_normadj_power(k, _X), leaf("W", "weight", (1, "I", "O")))


@cache
def tag_expression(k: int) -> Node:
    """Du et al.: sum_k (Â^k X) W_k, propagating the input as in PyG's TAGConv."""
    terms = [matmul(_square_normadj_power(i, _X), leaf(f"W{i}", "weight", (1, "I", "O")))
             for i in range(k + 1)]
    return add(*terms)


@cache
def gat_expression(negative_slope: float = 0.2) -> Node:
    """Veličković et al.: softmax(LeakyReLU(el_u + er_v)) aggregating the projected X W.

    el = (X W) a_src, er = rows(X W) a_dst; the projection is computed once and reused
    for the scores and the aggregation (the DGL/PyG plan).
    """
    projected = matmul(_X, leaf("W", "weight", ("H", "I", "D")))                  # [H, Ns, D]
    score_src = matmul(projected, leaf("a_src", "weight", ("H", "D", 1)))          # [H, Ns, 1]
    score_dst = matmul(dst_rows(projected), leaf("a_dst", "weight", ("H", "D", 1)))  # [H, Nd, 1]
    scores = attention(_ADJ, score_src, score_dst, negative_slope)               # [H, Nd, Ns]
    return matmul(scores, projected)                                             # [H, Nd, D]


@cache
def gatv2_expression(share_weights: bool = False, bias: bool = True,
                     negative_slope: float = 0.2) -> Node:
    """Brody et al.: a^T LeakyReLU(W_l x_u + W_r x_v) scores, aggregating W_l x_u (+ b_l)."""
    weight_src = leaf("Wl", "weight", ("H", "I", "D"))
    weight_dst = weight_src if share_weights else leaf("Wr", "weight", ("H", "I", "D"))
    h_src, h_dst = matmul(_X, weight_src), matmul(_X, weight_dst)
    if bias:
        h_src = affine(h_src, leaf("bl", "weight", ("H", 1, "D")))
        h_dst = affine(h_dst, leaf("bl" if share_weights else "br", "weight", ("H", 1, "D")))
    scores = attention_v2(_ADJ, h_src, dst_rows(h_dst), leaf("a", "weight", ("H", "D", 1)),
                          negative_slope)
    return matmul(scores, h_src)


@cache
def sage_expression(aggr: str = "mean", root_weight: bool = True, bias: bool = True) -> Node:
    """Hamilton et al.: (M X) W_l + b + rows(X) W_r, M the mean (D_in^-1 A) or the sum (A)
    over in-neighbours: aggregation first, as in PyG's SAGEConv.

    Raises:
        ValueError: for an aggregator other than mean or sum (max does not commute with
            the projection, so it has no other plan).
    """
    if aggr not in ("mean", "sum"):
        raise ValueError(f"sage_expression: aggr must be 'mean' or 'sum', got {aggr!r}")
    adjacency = leaf("M", "meanadj", (1, "Nd", "Ns")) if aggr == "mean" else _ADJ
    out = matmul(matmul(adjacency, _X), leaf("Wl", "weight", (1, "I", "O")))
    if bias:
        out = affine(out, leaf("bl", "weight", (1, 1, "O")))
    if root_weight:
        out = add(out, matmul(dst_rows(_X), leaf("Wr", "weight", (1, "I", "O"))))
    return out


@cache
def gin_expression(bias: bool = True) -> Node:
    """Xu et al.: (A X + (1 + eps) rows(X)) W + b, the first linear layer of GIN's MLP
    applied to the aggregated sum, as in PyG's GINConv (the rest of the MLP follows)."""
    combined = add(matmul(_ADJ, _X), scale(dst_rows(_X), leaf("s", "weight", (1, 1, 1))))
    out = matmul(combined, leaf("W", "weight", (1, "I", "O")))
    return affine(out, leaf("b", "weight", (1, 1, "O"))) if bias else out


RGCN_DECOMPOSITIONS = (None, "basis", "block")


@cache
def rgcn_expression(aggr: str = "mean", decomposition: str | None = None,
                    root_weight: bool = True, bias: bool = True) -> Node:
    """Schlichtkrull et al.: sum_r (A_r X) W_r + rows(X) W_root + b, as PyG's RGCNConv
    computes it: aggregate within each relation (A_r the sum, or D_r^-1 A_r the mean,
    over relation-r in-neighbours), then transform by W_r.

    The relations are the heads of the IR's values. W_r is a full weight [R, I, O], a
    basis combination W_r = sum_b C[r, b] V_b (`decomposition="basis"`, composed first
    as PyG does), or block-diagonal (`"block"`).

    Raises:
        ValueError: for an aggregator other than mean or sum (max does not commute with
            the transform) or an unknown decomposition.
    """
    if aggr not in ("mean", "sum"):
        raise ValueError(f"rgcn_expression: aggr must be 'mean' or 'sum', got {aggr!r}")
    if decomposition not in RGCN_DECOMPOSITIONS:
        raise ValueError(f"rgcn_expression: decomposition must be one of "
                         f"{RGCN_DECOMPOSITIONS}, got {decomposition!r}")
    adjacency = leaf("Ar", "relmeanadj" if aggr == "mean" else "reladj", ("R", "Nd", "Ns"))
    if decomposition == "basis":
        weight = mix(leaf("C", "weight", (1, "R", "B")), leaf("V", "weight", ("B", "I", "O")))
    else:
        weight = leaf("W", "weight", ("R", "I", "O"), block_diagonal=decomposition == "block")
    out = hsum(matmul(matmul(adjacency, _X), weight))
    if root_weight:
        out = add(out, matmul(dst_rows(_X), leaf("Wroot", "weight", (1, "I", "O"))))
    return affine(out, leaf("b", "weight", (1, 1, "O"))) if bias else out
