"""IR structural equality, the rewrite table, enumeration and input-oblivious pruning."""

from __future__ import annotations

import pytest

from gnnforge.plan import enumerate_compositions, enumerate_trees, explain, primitives, prune
from gnnforge.plan._explain import LAYER_EXPRESSIONS
from gnnforge.plan._ir import add, is_sparse, leaf, matmul, subtrees
from gnnforge.plan._prune import _points, _signature, _dominates, REGIMES
from gnnforge.plan._rewrites import RULES

X = leaf("X", "dense", (1, "N", "I"))
W = leaf("W", "weight", (1, "I", "O"))
A = leaf("Â", "normadj", (1, "N", "N"))


def test_structural_equality_and_hash():
    one, two = matmul(A, matmul(X, W)), matmul(leaf("Â", "normadj", (1, "N", "N")),
                                                matmul(X, leaf("W", "weight", (1, "I", "O"))))
    assert one == two and hash(one) == hash(two) and one is not two
    assert one != matmul(matmul(A, X), W)
    assert repr(one) == "(Â @ (X @ W))"


def test_illegal_products_are_refused():
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul(W, X)
    with pytest.raises(ValueError, match="sparse @ sparse"):
        matmul(A, A)


def test_add_is_flat_and_commutative():
    p, q = matmul(X, W), matmul(X, leaf("V", "weight", (1, "I", "O")))
    assert add(p, q) == add(q, p)
    assert add(add(p, q), p).inputs == add(p, q, p).inputs
    with pytest.raises(ValueError, match="different shapes"):
        add(p, X)


def test_every_rule_has_a_comment_stating_its_identity():
    import inspect

    from gnnforge.plan import _rewrites
    source = inspect.getsource(_rewrites)
    for name, _ in RULES:
        line = next(l for l in source.splitlines() if f'("{name}"' in l)
        previous = source.splitlines()[source.splitlines().index(line) - 1].strip()
        assert previous.startswith("#") and "=" in previous, name


@pytest.mark.parametrize("layer", sorted(LAYER_EXPRESSIONS))
def test_enumeration_is_closed_legal_and_starts_at_the_default(layer):
    expression = LAYER_EXPRESSIONS[layer]()
    trees = enumerate_trees(expression)
    assert trees[0] == expression and len(set(trees)) == len(trees)
    for tree in trees:
        assert tree.shape == expression.shape
        for node in subtrees(tree):
            if node.op == "matmul":
                assert not (is_sparse(node.inputs[0]) and is_sparse(node.inputs[1]))


def test_known_counts():
    # GCN: A(XW), (AX)W, each with Â precomputed or dynamic.
    assert len(enumerate_compositions(LAYER_EXPRESSIONS["gcn"]())) == 4
    trees = {repr(t) for t in enumerate_trees(LAYER_EXPRESSIONS["gat"]())}
    assert "((attention(A, (X @ (W @ a_src)), dst_rows((X @ (W @ a_dst)))) @ X) @ W)" in trees
    horner = "((X @ W0) + (Â @ ((X @ W1) + (Â @ ((X @ W2) + (Â @ (X @ W3)))))))"
    assert horner in {repr(t) for t in enumerate_trees(LAYER_EXPRESSIONS["tag"]())}


def test_enumeration_limit_is_reported():
    with pytest.raises(RuntimeError, match="passed 3 trees"):
        enumerate_trees(LAYER_EXPRESSIONS["tag"](), limit=3)


@pytest.mark.parametrize("layer", sorted(LAYER_EXPRESSIONS))
def test_pruning_drops_only_duplicates_and_dominated_plans(layer):
    compositions = enumerate_compositions(LAYER_EXPRESSIONS[layer]())
    verdicts = prune(compositions)
    kept = [v.index for v in verdicts if v.kept]
    assert kept, "pruning kept nothing"
    signatures = {r: [_signature(c, _points(r)) for c in compositions] for r in REGIMES}
    for v in verdicts:
        if v.kept:
            assert set(v.wins_when) <= set(REGIMES) and v.wins_when
            continue
        if v.reason.startswith("duplicate"):
            other = int(v.reason.split("#")[1])
            assert all(signatures[r][other] == signatures[r][v.index] for r in REGIMES)
            assert verdicts[other].kept or verdicts[other].reason.startswith("dominated")
        else:
            assert v.reason.startswith("dominated by #")
            for r in REGIMES:
                assert any(_dominates(signatures[r][j], signatures[r][v.index])
                           for j in range(len(compositions)) if j != v.index)
    # at least one kept tree for every primitive multiset no other plan dominates
    for index, composition in enumerate(compositions):
        undominated = all(
            not any(_dominates(signatures[r][j], signatures[r][index])
                    for j in range(len(compositions)) if j != index) for r in REGIMES)
        if undominated:
            same = [j for j in kept
                    if all(signatures[r][j] == signatures[r][index] for r in REGIMES)]
            assert same, f"#{index} {composition} has no kept representative"


def test_pruning_keeps_the_papers_alternatives():
    gat = [v for v in prune(enumerate_compositions(LAYER_EXPRESSIONS["gat"]())) if v.kept]
    assert [v.wins_when for v in gat] == [("in>out",), ("in<out",)]
    tag = [repr(v.composition.tree) for v in
           prune(enumerate_compositions(LAYER_EXPRESSIONS["tag"]())) if v.kept]
    assert any(t.startswith("((X @ W0) + (Â @") for t in tag)  # Horner
    names = {p.name for v in prune(enumerate_compositions(LAYER_EXPRESSIONS["gcn"]()))
             if v.kept for p in primitives(v.composition)}
    assert {"spmm_u", "spmm_w", "sddmm", "rowbcast", "gemm"} <= names


def test_dynamic_hops_fuse_their_row_scalings():
    sgc = enumerate_compositions(LAYER_EXPRESSIONS["sgc"]())
    dynamic = next(c for c in sgc if c.norm == "dynamic")  # (Â(ÂX))W: 2 hops
    assert [p.name for p in primitives(dynamic)].count("rowbcast") == 3  # not 4


def test_explain_lists_every_tree_and_verdict():
    text = explain(LAYER_EXPRESSIONS["gcn"]())
    assert "4 compositions enumerated, 4 kept" in text
    assert text.count("KEPT") == 4 and "spmm_u(f=I)" in text
    assert text.count("the default: costed for every width") == 1
