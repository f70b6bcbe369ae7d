"""Mapping rules from IR nodes to the primitives that execute them, and compositions.

A composition is one association tree plus how `Â` is realised: `precompute` builds the
normalised edge values once with an SDDMM and aggregates with a weighted SpMM;
`dynamic` scales rows before and after an unweighted SpMM (the D^-1/2 factors applied
to the features instead of the edges). Mixing the two inside one tree pays the SDDMM
and still scales rows, so a composition uses one realisation throughout.

Primitive sizes are products of symbols (`("E", "H")`), bound to numbers by `bind`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gnnforge.plan._ir import Dim, Node, is_block_diagonal, is_sparse, render, subtrees

__all__ = ["NORM_MODES", "PRIMITIVES", "Composition", "Primitive", "bind",
           "is_dynamic_propagation", "is_fused_relation_sum", "primitives"]

NORM_MODES = ("precompute", "dynamic")
# Every primitive the cost models know; sizes each takes (all products of symbols).
PRIMITIVES = {
    "gemm": ("m", "k", "n", "batch"),         # batch x ([m, k] @ [k, n])
    "spmm_u": ("f",),                         # sum_u x_u over in-edges, width f
    "spmm_w": ("f",),                         # sum_u w_e x_u, fixed edge weights
    "spmm_att": ("f", "heads"),               # sum_u a_e,h x_u,h, learned per-head weights
    "sddmm": ("f",),                          # per-edge op of x_u and y_v, width f
    "edge_softmax": ("heads",),               # softmax over each node's in-edges
    "rowbcast": ("rows", "f"),                # diag(d) X: scale each row
    "elementwise": ("count",),                # one pass over `count` values
}

Size = tuple[Dim, ...]  # a product of symbols and ints


@dataclass(frozen=True)
class Primitive:
    """One primitive call: its name and sizes (each a product of symbols).

    `once`: the call depends on the graph alone (GCN's edge normalisation), so it runs
    once per graph and its cost vanishes over the epochs of a fixed graph.
    """

    name: str
    sizes: tuple[tuple[str, Size], ...]
    once: bool = False

    def __str__(self) -> str:
        text = ", ".join(f"{k}={'*'.join(map(str, v))}" for k, v in self.sizes)
        return f"{self.name}({text})"


@dataclass(frozen=True)
class Composition:
    """One executable plan of a layer: an association `tree` and the `Â` realisation."""

    tree: Node
    norm: str | None = None  # "precompute" | "dynamic" | None (no Â in the tree)

    def __str__(self) -> str:
        return render(self.tree) + (f"  [Â {self.norm}]" if self.norm else "")


def _prim(name: str, once: bool = False, **sizes: Size) -> Primitive:
    return Primitive(name, tuple(sorted(sizes.items())), once)


def _width(node: Node) -> Size:
    return tuple(d for d in (node.shape[0], node.shape[2]) if d != 1) or (1,)


def is_dynamic_propagation(node: Node, norm: str | None) -> bool:
    """True for Â @ M realised dynamically: its left D^-1/2 can fuse into a consumer."""
    return norm == "dynamic" and node.op == "matmul" and node.inputs[0].kind == "normadj"


def is_fused_relation_sum(node: Node) -> bool:
    """True for hsum(A_r @ Y) with Y per relation: one SpMM over the (relation, source)
    rows sums the relations as it aggregates (no [Nd, R, O] value is made)."""
    if node.op != "hsum" or node.inputs[0].op != "matmul":
        return False
    left, right = node.inputs[0].inputs
    return left.op == "leaf" and left.kind in ("reladj", "relmeanadj") and right.shape[0] != 1


def _relational_rule(node: Node) -> list[Primitive]:
    """A_r Y or (sum_r C_rb A_r) Y: every edge belongs to one relation, so an SpMM of
    width F per edge (not R x F), into R x Nd rows (Y shared) or R x Ns sources."""
    left, right = node.inputs
    width = (right.shape[2],)
    if left.op == "mix_t":  # B basis adjacencies: per-edge weights C[r_e, b], per head
        return [_prim("spmm_att", f=(left.shape[0], *width), heads=(left.shape[0],))]
    out = [_prim("spmm_u", f=width)]
    if left.kind == "relmeanadj":
        out.append(_prim("rowbcast", rows=(node.shape[0], node.shape[1]), f=width))
    return out


def _dense_gemm(left: Node, right: Node) -> Primitive:
    # a block-diagonal weight multiplies I / nb inputs per output ("Ib")
    inner = ("Ib",) if is_block_diagonal(right) else (left.shape[2],)
    if right.shape[0] == left.shape[0] or left.shape[0] == 1 and right.shape[0] == 1:
        batch = left.shape[0]  # H separate products, or a single one
        return _prim("gemm", m=(left.shape[1],), k=inner, n=(right.shape[2],), batch=(batch,))
    # [1, N, K] @ [H, K, C]: one GEMM against the heads laid side by side
    return _prim("gemm", m=(left.shape[1],), k=inner, n=(right.shape[0], right.shape[2]),
                 batch=(1,))


def _matmul_rule(node: Node, norm: str | None, value_used: bool) -> list[Primitive]:
    left, right = node.inputs
    heads, rows, _ = node.shape
    if left.kind in ("reladj", "relmeanadj"):
        return _relational_rule(node)
    if left.kind in ("dense", "ones", "weight"):
        return [_dense_gemm(left, right)]
    width = _width(node)
    if left.kind == "adjacency":
        return [_prim("spmm_u", f=width)]
    if left.kind == "meanadj":  # the sum over in-edges, then each row scaled by 1/degree
        return [_prim("spmm_u", f=width), _prim("rowbcast", rows=(rows,), f=width)]
    if left.kind == "normadj":
        if norm == "dynamic":
            out = [_prim("spmm_u", f=width)]
            # D^-1/2 on the right fuses with a dynamic inner hop's left D^-1/2 (one scaling);
            # the left D^-1/2 runs only when a consumer needs this hop's scaled value.
            out.append(_prim("rowbcast", rows=(right.shape[1],), f=width))
            if value_used:
                out.append(_prim("rowbcast", rows=(rows,), f=width))
            return out
        return [_prim("spmm_w", f=width)]
    return [_prim("spmm_att", f=width, heads=(heads,))]


def _node_rule(node: Node, norm: str | None, value_used: bool) -> list[Primitive]:
    """The explicit mapping table: which primitives execute this node."""
    if node.op in ("leaf", "dst_rows"):
        return []  # inputs, and a row slice that is a view
    if node.op == "matmul":
        return _matmul_rule(node, norm, value_used)
    if node.op == "add":
        return [_prim("elementwise", count=(node.shape[1], *_width(node)))
                for _ in node.inputs[1:]]
    if node.op in ("affine", "affine_rows", "scale"):
        return [_prim("elementwise", count=(node.shape[1], *_width(node)))]
    if node.op == "hsum":
        if is_fused_relation_sum(node):  # one SpMM over (relation, source) rows
            left, right = node.inputs[0].inputs
            name = "spmm_w" if left.kind == "relmeanadj" else "spmm_u"  # 1 / deg_r(v)
            return [_prim(name, f=(right.shape[2],))]
        heads = node.inputs[0].shape[0]
        return [_prim("elementwise", count=(heads, node.shape[1], node.shape[2]))]
    if node.op == "mix":  # W_r = sum_b C_rb V_b: [R, B] @ [B, I x O]
        coeff, mixed = node.inputs
        return [_prim("gemm", m=(coeff.shape[1],), k=(coeff.shape[2],),
                      n=(mixed.shape[1], mixed.shape[2]), batch=(1,))]
    if node.op == "mix_t":
        coeff, mixed = node.inputs
        if is_sparse(mixed):  # the basis edge weights C[r_e, b] (x 1 / deg_r(v))
            return [_prim("elementwise", count=("E", coeff.shape[2]))]
        return [_prim("gemm", m=(mixed.shape[1], mixed.shape[2]), k=(coeff.shape[1],),
                      n=(coeff.shape[2],), batch=(1,))]
    if node.op == "attention":  # el_u + er_v per edge and head, LeakyReLU, softmax
        return [_prim("sddmm", f=(node.shape[0],)), _prim("edge_softmax", heads=(node.shape[0],))]
    if node.op == "attention_v2":  # h_u + h_v per edge [E, H, D], LeakyReLU, dot with a
        width = _width(node.inputs[1])
        return [_prim("sddmm", f=width), _prim("elementwise", count=("E", *width)),
                _prim("edge_softmax", heads=(node.shape[0],))]
    raise ValueError(f"no primitive rule for op {node.op!r}")


def primitives(composition: Composition) -> list[Primitive]:
    """The primitives one run of `composition` executes, each shared sub-tree once (CSE)."""
    out: list[Primitive] = []
    nodes = subtrees(composition.tree)
    if composition.norm == "precompute" and any(n.kind == "normadj" for n in nodes):
        out.append(_prim("sddmm", once=True, f=(1,)))  # w_e = d_v^-1/2 d_u^-1/2, per graph
    needed = {composition.tree}  # nodes whose own (scaled) value some consumer reads
    for node in nodes:
        fused = is_dynamic_propagation(node, composition.norm)
        needed.update(i for i in node.inputs
                      if not (fused and is_dynamic_propagation(i, composition.norm)))
    fused = {n.inputs[0] for n in nodes if is_fused_relation_sum(n)}  # run by their hsum
    for node in nodes:
        if node.kind == "weight" and node.op == "matmul" or node in fused:
            continue  # parameters only (W a): O(I x D) work independent of the graph
        out.extend(_node_rule(node, composition.norm, node in needed))
    return out


def bind(size: Size, values: dict[str, float]) -> float:
    """Multiply out a symbolic size; raises KeyError naming an unbound symbol."""
    return math.prod(values[d] if isinstance(d, str) else d for d in size)
