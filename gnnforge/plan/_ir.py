"""A small matrix IR for one GNN layer: immutable nodes with structural equality.

Every value is a stack of matrices with shape `(heads, rows, cols)`; a dimension is an
int or a symbol (`"Nd"`, `"Ns"`, `"I"`, `"O"`, `"H"`, `"D"`) bound to numbers only when a
plan is costed or run, so one enumeration serves every graph and every width.

Leaf kinds:
    dense     node features (one row per node)               [1, N, F]
    weight    learned parameter, no row per node            [H or 1, K, C]
    ones      the all-ones column, used for row sums        [1, N, 1]
    adjacency A, the graph's 0/1 adjacency (dst rows)         [1, Nd, Ns] (sparse)
    normadj   D^-1/2 A D^-1/2, GCN's normalised adjacency    [1, Nd, Ns] (sparse)
    meanadj   D_in^-1 A, the mean over in-neighbours (SAGE)  [1, Nd, Ns] (sparse)
    reladj    A_r, one adjacency per relation (RGCN sum)     [R, Nd, Ns] (sparse)
    relmeanadj D_r^-1 A_r, the mean within each relation     [R, Nd, Ns] (sparse)
    (a weight leaf may be block-diagonal: [R, I, O] stored as R x nb blocks, RGCN's
    block decomposition; its products cost I / nb per output)
Inner ops:
    matmul        a @ b, heads broadcast (1 against H)
    add           element-wise sum of two or more terms (commutative, kept sorted)
    affine        m + 1 b^T: a bias added to every row
    affine_rows   m + r b^T: a bias scaled per row by r ([heads, rows, 1])
    dst_rows      the first Nd rows (a block's destination nodes lead its source nodes)
    scale         m times a learned scalar (a [1, 1, 1] weight): GIN's (1 + eps)
    attention     GAT scores -> a sparse matrix of edge softmax weights [H, Nd, Ns]
    attention_v2  GATv2 scores, same result kind
    hsum          the sum over the heads axis: [H, rows, cols] -> [1, rows, cols]
                  (RGCN's sum over relations, whose values are stacked as heads)
    mix           out_r = sum_b C[r, b] m_b: [B, K, C] -> [R, K, C] (RGCN's bases)
    mix_t         out_b = sum_r C[r, b] m_r: [R, K, C] -> [B, K, C]; of a relational
                  adjacency, the basis adjacencies (edge weights C[r_e, b])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["Dim", "Node", "SPARSE_KINDS", "add", "affine", "affine_rows", "attention",
           "attention_v2", "dst_rows", "hsum", "is_block_diagonal", "is_sparse", "leaf",
           "matmul", "mix", "mix_t", "render", "scale", "subtrees"]

Dim = int | str
SPARSE_KINDS = ("adjacency", "normadj", "meanadj", "reladj", "relmeanadj", "attention",
                "attention_v2")
_LEAF_KINDS = ("dense", "weight", "ones", "adjacency", "normadj", "meanadj", "reladj",
               "relmeanadj")


@dataclass(frozen=True)
class Node:
    """One IR node: `op`, its `inputs`, result `shape` (heads, rows, cols), `attrs`.

    Equality and hashing are structural (dataclass fields), so two trees that spell the
    same computation are the same key in a set or a memo table: that is what gives
    common sub-expression reuse when a plan is costed or run.
    """

    op: str
    inputs: tuple[Node, ...]
    shape: tuple[Dim, Dim, Dim]
    attrs: tuple[tuple[str, object], ...] = ()
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.op, self.inputs, self.shape, self.attrs)))

    def __hash__(self) -> int:
        return self._hash

    def attr(self, name: str, default: object = None) -> object:
        return dict(self.attrs).get(name, default)

    @cached_property
    def kind(self) -> str:
        """`dense`, `weight`, `ones` or a sparse kind: what the value is, for the rules."""
        if self.op == "leaf":
            return str(self.attr("kind"))
        if self.op in ("attention", "attention_v2"):
            return self.op
        if self.op in ("mix", "mix_t"):  # mixing keeps what the mixed value is
            mixed = self.inputs[1].kind
            return mixed if mixed == "weight" or mixed in SPARSE_KINDS else "dense"
        if self.op == "matmul" and all(i.kind == "weight" for i in self.inputs):
            return "weight"
        return "dense"

    def __repr__(self) -> str:
        return render(self)


def is_sparse(node: Node) -> bool:
    return node.kind in SPARSE_KINDS


def leaf(name: str, kind: str, shape: tuple[Dim, Dim, Dim],
         block_diagonal: bool = False) -> Node:
    """A leaf; `block_diagonal` marks a weight whose every head is block-diagonal."""
    if kind not in _LEAF_KINDS:
        raise ValueError(f"leaf kind must be one of {_LEAF_KINDS}, got {kind!r}")
    if block_diagonal and kind != "weight":
        raise ValueError(f"leaf {name!r}: only a weight can be block-diagonal, got {kind!r}")
    attrs = (("kind", kind), ("name", name)) + ((("blocks", True),) if block_diagonal else ())
    return Node("leaf", (), tuple(shape), attrs)


def is_block_diagonal(node: Node) -> bool:
    return node.op == "leaf" and bool(node.attr("blocks", False))


def _heads(a: Dim, b: Dim) -> Dim:
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    raise ValueError(f"heads {a} and {b} do not broadcast")


def matmul(a: Node, b: Node) -> Node:
    """a @ b; raises ValueError when inner dimensions differ or both sides are sparse."""
    if a.shape[2] != b.shape[1]:
        raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    if is_sparse(a) and is_sparse(b):
        raise ValueError("matmul: sparse @ sparse (SpGEMM) has no primitive here")
    if is_sparse(b):
        raise ValueError("matmul: a sparse right operand has no primitive here")
    return Node("matmul", (a, b), (_heads(a.shape[0], b.shape[0]), a.shape[1], b.shape[2]))


def add(*terms: Node) -> Node:
    flat: list[Node] = []
    for term in terms:
        flat.extend(term.inputs if term.op == "add" else (term,))
    shapes = {t.shape for t in flat}
    if len(shapes) != 1:
        raise ValueError(f"add: terms have different shapes {sorted(map(str, shapes))}")
    if len(flat) == 1:
        return flat[0]
    return Node("add", tuple(sorted(flat, key=render)), flat[0].shape)


def affine(m: Node, bias: Node) -> Node:
    return Node("affine", (m, bias), m.shape)


def affine_rows(m: Node, rows: Node, bias: Node) -> Node:
    return Node("affine_rows", (m, rows, bias), m.shape)


def dst_rows(m: Node, rows: Dim = "Nd") -> Node:
    if m.op == "dst_rows":
        return m
    return Node("dst_rows", (m,), (m.shape[0], rows, m.shape[2]))


def scale(m: Node, factor: Node) -> Node:
    """m times the scalar weight `factor` ([1, 1, 1])."""
    if is_sparse(m) or factor.shape != (1, 1, 1):
        raise ValueError(f"scale: needs a dense value and a [1, 1, 1] factor, got {m.kind} "
                         f"and {factor.shape}")
    return Node("scale", (m, factor), m.shape)


def hsum(m: Node) -> Node:
    """The sum of m's heads, [1, rows, cols]; raises ValueError for a sparse m."""
    if is_sparse(m):
        raise ValueError("hsum: a sparse value has no primitive here")
    return Node("hsum", (m,), (1, m.shape[1], m.shape[2]))


def mix(coeff: Node, m: Node) -> Node:
    """out_r = sum_b coeff[r, b] m_b: coeff [1, R, B], m [B, K, C] -> [R, K, C]."""
    if coeff.shape[0] != 1 or m.shape[0] != coeff.shape[2]:
        raise ValueError(f"mix: coefficients {coeff.shape} do not mix heads of {m.shape}")
    return Node("mix", (coeff, m), (coeff.shape[1], m.shape[1], m.shape[2]))


def mix_t(coeff: Node, m: Node) -> Node:
    """out_b = sum_r coeff[r, b] m_r: coeff [1, R, B], m [R, K, C] -> [B, K, C]."""
    if coeff.shape[0] != 1 or m.shape[0] != coeff.shape[1]:
        raise ValueError(f"mix_t: coefficients {coeff.shape} do not mix heads of {m.shape}")
    return Node("mix_t", (coeff, m), (coeff.shape[2], m.shape[1], m.shape[2]))


def attention(adjacency: Node, score_src: Node, score_dst: Node, slope: float) -> Node:
    heads = _heads(score_src.shape[0], score_dst.shape[0])
    return Node("attention", (adjacency, score_src, score_dst), (heads, *adjacency.shape[1:]),
                (("negative_slope", slope),))


def attention_v2(adjacency: Node, h_src: Node, h_dst: Node, att: Node, slope: float) -> Node:
    return Node("attention_v2", (adjacency, h_src, h_dst, att),
                (h_src.shape[0], *adjacency.shape[1:]), (("negative_slope", slope),))


def subtrees(node: Node) -> list[Node]:
    """Every distinct sub-expression once, inputs before users (post-order, CSE)."""
    seen: dict[Node, None] = {}

    def visit(n: Node) -> None:
        if n in seen:
            return
        for child in n.inputs:
            visit(child)
        seen[n] = None

    visit(node)
    return list(seen)


def render(node: Node) -> str:
    """A one-line infix spelling: `(A @ (X @ W))`."""
    if node.op == "leaf":
        return str(node.attr("name"))
    args = [render(i) for i in node.inputs]
    if node.op == "matmul":
        return f"({args[0]} @ {args[1]})"
    if node.op == "add":
        return "(" + " + ".join(args) + ")"
    if node.op == "affine":
        return f"({args[0]} + 1{args[1]})"
    if node.op == "affine_rows":
        return f"({args[0]} + {args[1]}{args[2]})"
    if node.op == "scale":
        return f"{args[1]}{args[0]}"
    return f"{node.op}({', '.join(args)})"
