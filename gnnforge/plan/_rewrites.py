"""The rewrite table: (name, rule) pairs that turn a layer expression into an equal one.

Each rule takes a node and returns the equal nodes it rewrites to at that position (an
empty list when the pattern does not match or the result would be illegal, e.g. a
sparse @ sparse product). `rewrites_anywhere` applies every rule at every position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gnnforge.plan._ir import (Node, add, affine_rows, attention, attention_v2, dst_rows, hsum,
                               is_sparse, leaf, matmul, mix, mix_t, scale)

__all__ = ["RULES", "rebuild", "rewrites_anywhere"]


def _try(build: Callable[[], Node]) -> list[Node]:
    try:
        return [build()]
    except ValueError:  # the rewrite would need an illegal product: not applicable here
        return []


def _assoc_right(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[0].op != "matmul":
        return []
    (a, b), c = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: matmul(a, matmul(b, c)))


def _assoc_left(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[1].op != "matmul":
        return []
    a, (b, c) = n.inputs[0], n.inputs[1].inputs
    return _try(lambda: matmul(matmul(a, b), c))


def _bias_through_sparse(n: Node) -> list[Node]:
    if n.op != "matmul" or not is_sparse(n.inputs[0]) or n.inputs[1].op != "affine":
        return []
    s, (m, bias) = n.inputs[0], n.inputs[1].inputs
    ones = leaf("1", "ones", (1, s.shape[2], 1))
    return _try(lambda: affine_rows(matmul(s, m), matmul(s, ones), bias))


def _rows_then_matmul(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[0].op != "dst_rows":
        return []
    (m,), w = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: dst_rows(matmul(m, w), n.shape[1]))


def _matmul_then_rows(n: Node) -> list[Node]:
    if n.op != "dst_rows" or n.inputs[0].op != "matmul":
        return []
    m, w = n.inputs[0].inputs
    return _try(lambda: matmul(dst_rows(m, n.shape[1]), w))


def _factor_left(n: Node) -> list[Node]:
    if n.op != "add":
        return []
    out = []
    terms = n.inputs
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            a, b = terms[i], terms[j]
            if a.op == "matmul" and b.op == "matmul" and a.inputs[0] == b.inputs[0]:
                rest = [t for k, t in enumerate(terms) if k not in (i, j)]
                out += _try(lambda: add(matmul(a.inputs[0], add(a.inputs[1], b.inputs[1])),
                                        *rest))
    return out


def _distribute_right(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[0].op != "add":
        return []
    terms, w = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: add(*(matmul(t, w) for t in terms)))


def _factor_right(n: Node) -> list[Node]:
    if n.op != "add":
        return []
    out = []
    terms = n.inputs
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            a, b = terms[i], terms[j]
            if a.op == "matmul" and b.op == "matmul" and a.inputs[1] == b.inputs[1]:
                rest = [t for k, t in enumerate(terms) if k not in (i, j)]
                out += _try(lambda: add(matmul(add(a.inputs[0], b.inputs[0]), a.inputs[1]),
                                        *rest))
    return out


def _scale_then_matmul(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[0].op != "scale":
        return []
    (m, factor), w = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: scale(matmul(m, w), factor))


def _matmul_then_scale(n: Node) -> list[Node]:
    if n.op != "scale" or n.inputs[0].op != "matmul":
        return []
    (m, w), factor = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: matmul(scale(m, factor), w))


def _rows_then_scale(n: Node) -> list[Node]:
    if n.op != "scale" or n.inputs[0].op != "dst_rows":
        return []
    (m,), factor = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: dst_rows(scale(m, factor), n.shape[1]))


def _scale_then_rows(n: Node) -> list[Node]:
    if n.op != "dst_rows" or n.inputs[0].op != "scale":
        return []
    m, factor = n.inputs[0].inputs
    return _try(lambda: scale(dst_rows(m, n.shape[1]), factor))


def _bases_out_of_sum(n: Node) -> list[Node]:
    if n.op != "hsum" or n.inputs[0].op != "matmul" or n.inputs[0].inputs[1].op != "mix":
        return []
    p, (c, v) = n.inputs[0].inputs[0], n.inputs[0].inputs[1].inputs
    return _try(lambda: hsum(matmul(mix_t(c, p), v)))


def _bases_into_sum(n: Node) -> list[Node]:
    if n.op != "hsum" or n.inputs[0].op != "matmul" or n.inputs[0].inputs[0].op != "mix_t":
        return []
    (c, p), v = n.inputs[0].inputs[0].inputs, n.inputs[0].inputs[1]
    if v.kind != "weight":
        return []
    return _try(lambda: hsum(matmul(p, mix(c, v))))


def _mix_then_matmul(n: Node) -> list[Node]:
    if n.op != "mix_t" or n.inputs[1].op != "matmul" or n.inputs[1].inputs[1].shape[0] != 1:
        return []
    c, (s, y) = n.inputs[0], n.inputs[1].inputs
    return _try(lambda: matmul(mix_t(c, s), y))


def _matmul_then_mix(n: Node) -> list[Node]:
    if n.op != "matmul" or n.inputs[0].op != "mix_t" or n.inputs[1].shape[0] != 1:
        return []
    (c, s), y = n.inputs[0].inputs, n.inputs[1]
    return _try(lambda: mix_t(c, matmul(s, y)))


# (name, rule): each comment states the identity and when it is legal.
RULES: tuple[tuple[str, Callable[[Node], list[Node]]], ...] = (
    # (a @ b) @ c = a @ (b @ c): always, unless b @ c would be sparse @ sparse
    ("assoc_right", _assoc_right),
    # a @ (b @ c) = (a @ b) @ c: always, unless a @ b would be sparse @ sparse
    ("assoc_left", _assoc_left),
    # S (M + 1 b^T) = S M + (S 1) b^T: any S; aggregate before a biased projection
    ("bias_through_sparse", _bias_through_sparse),
    # rows(M) @ W = rows(M @ W): row selection commutes with a right product, always
    ("rows_then_matmul", _rows_then_matmul),
    # rows(M @ W) = rows(M) @ W: the same identity read the other way
    ("matmul_then_rows", _matmul_then_rows),
    # S P + S Q = S (P + Q): distributivity, any shared left factor S (Horner for TAGCN)
    ("factor_left", _factor_left),
    # (P + Q) W = P W + Q W: distributivity on the right, always (GIN's projection)
    ("distribute_right", _distribute_right),
    # P W + Q W = (P + Q) W: the same identity read the other way
    ("factor_right", _factor_right),
    # (s M) W = s (M W): a scalar commutes with a right product, always
    ("scale_then_matmul", _scale_then_matmul),
    # s (M W) = (s M) W: the same identity read the other way
    ("matmul_then_scale", _matmul_then_scale),
    # rows(s M) = s rows(M): row selection commutes with a scalar, always
    ("rows_then_scale", _rows_then_scale),
    # s rows(M) = rows(s M): the same identity read the other way
    ("scale_then_rows", _scale_then_rows),
    # RGCN's bases, for any P with one head per relation (sparse too: the basis-b
    # adjacency sum_r C_rb A_r): sum_r P_r (sum_b C_rb V_b) = sum_b (sum_r C_rb P_r) V_b
    ("bases_out_of_sum", _bases_out_of_sum),
    # the same identity read the other way, when V is a weight: W_r = sum_b C_rb V_b first
    ("bases_into_sum", _bases_into_sum),
    # mixing commutes with a right product shared by every head (Y has one head):
    # sum_r C_rb (S_r Y) = (sum_r C_rb S_r) Y
    ("mix_then_matmul", _mix_then_matmul),
    # the same identity read the other way: (sum_r C_rb S_r) Y = sum_r C_rb (S_r Y)
    ("matmul_then_mix", _matmul_then_mix),
)


def rebuild(n: Node, inputs: tuple[Node, ...]) -> Node:
    """`n` with new inputs, its shape recomputed by the op's constructor."""
    if n.op == "matmul":
        return matmul(*inputs)
    if n.op == "add":
        return add(*inputs)
    if n.op == "dst_rows":
        return dst_rows(inputs[0], n.shape[1])
    if n.op == "scale":
        return scale(*inputs)
    if n.op == "hsum":
        return hsum(*inputs)
    if n.op == "mix":
        return mix(*inputs)
    if n.op == "mix_t":
        return mix_t(*inputs)
    if n.op == "attention":
        return attention(*inputs, n.attr("negative_slope"))
    if n.op == "attention_v2":
        return attention_v2(*inputs, n.attr("negative_slope"))
    return Node(n.op, inputs, n.shape, n.attrs)


def rewrites_anywhere(n: Node) -> Iterator[Node]:
    """Every tree one rule application away from `n`, at the root or inside."""
    for _, rule in RULES:
        yield from rule(n)
    for index, child in enumerate(n.inputs):
        for new_child in rewrites_anywhere(child):
            inputs = n.inputs[:index] + (new_child,) + n.inputs[index + 1:]
            try:
                yield rebuild(n, inputs)
            except ValueError:
                continue
