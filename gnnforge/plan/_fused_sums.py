"""Sums of projections as accumulated GEMMs: `(A W_1) + b + (B W_2) + C` runs as
`addmm(b, A, W_1)`, then `addmm_(B, W_2)` and `add_(C)` into that one output.

A layer's output is often a sum of dense projections and a bias: SAGE's
`(M X) W_l + b + rows(X) W_r`, GCN's `(Â X) W + b` when it aggregates first, GIN's
first linear layer. Evaluated node by node, every term is an [N, O] tensor written by its
own GEMM and read again by an element-wise add; a BLAS GEMM adds into an existing
output (beta = 1) at no extra pass. Measured on the 2-core VM (GitHub, 37,700 x 128 -> 64
twice plus a bias, 2 threads, no grad, median of 41): mm + add + add 8.77 ms, addmm then
addmm_ 7.50 ms.

Autograd: the accumulator is the output of `addmm`, whose backward needs only its two
factors, so adding into it in place is safe. Under autocast the in-place steps would keep
the first product's dtype where the node-by-node sum promotes, so sums are not fused
there (the callers check).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import NamedTuple

from gnnforge.plan._ir import Node, is_block_diagonal, subtrees

__all__ = ["SumTerms", "sum_terms", "use_counts"]


class SumTerms(NamedTuple):
    """A sum split for accumulation: one-head projections `input @ weight` (fusable into
    a GEMM's beta = 1 output), row biases ([1, 1, O] weights) and any other terms."""

    products: tuple[Node, ...]
    biases: tuple[Node, ...]
    others: tuple[Node, ...]


@lru_cache(maxsize=256)
def use_counts(tree: Node) -> Counter:
    """How many input slots of `tree`'s distinct sub-expressions name each node."""
    counts: Counter = Counter()
    for node in subtrees(tree):
        counts.update(node.inputs)
    return counts


@lru_cache(maxsize=1024)
def sum_terms(node: Node, tree: Node) -> SumTerms | None:
    """`node` (an `add` or `affine` of one head) as terms to accumulate, nested sums used
    only here flattened into it; None when no term is a fusable projection.

    A projection is fusable when `tree` uses it only in this sum (its value is then never
    needed on its own): a dense one-head input times a one-head weight that is not
    block-diagonal.
    """
    if node.op not in ("add", "affine") or node.shape[0] != 1:
        return None
    counts = use_counts(tree)
    products: list[Node] = []
    biases: list[Node] = []
    others: list[Node] = []
    for term, is_bias in _flat_terms(node, counts):
        if is_bias:
            biases.append(term)
        elif counts[term] == 1 and _is_projection(term):
            products.append(term)
        else:
            others.append(term)
    if not products:
        return None
    return SumTerms(tuple(products), tuple(biases), tuple(others))


def _flat_terms(node: Node, counts: Counter) -> list[tuple[Node, bool]]:
    """(term, is_bias) of a sum; inner sums that nothing else uses are opened up."""
    if node.op == "affine":
        inner, bias = node.inputs
        return _open(inner, counts) + [(bias, True)]
    terms: list[tuple[Node, bool]] = []
    for term in node.inputs:
        terms.extend(_open(term, counts))
    return terms


def _open(term: Node, counts: Counter) -> list[tuple[Node, bool]]:
    if term.op in ("add", "affine") and counts[term] == 1 and term.shape[0] == 1:
        return _flat_terms(term, counts)
    return [(term, False)]


def _is_projection(node: Node) -> bool:
    if node.op != "matmul" or node.shape[0] != 1:
        return False
    left, right = node.inputs
    return (left.kind == "dense" and left.shape[0] == 1 and right.kind == "weight"
            and right.shape[0] == 1 and not is_block_diagonal(right))
