"""`embedding_sum` equals embedding_bag(mode='sum') in values and table gradients, eager,
through its custom op and under torch.compile; the atom encoder takes it when traced."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import ATOM_FEATURE_DIMS
from gnnforge.nn import FeatureEncoder
from gnnforge.nn._embedding_sum import embedding_sum, embedding_sum_op


def _reference(index, table):
    return F.embedding_bag(index, table, mode="sum")


def _check_equal(function, index, table, seed=0):
    generator = torch.Generator().manual_seed(seed)
    upstream = torch.randn(index.shape[0], table.shape[1], generator=generator,
                           dtype=table.dtype)
    leaf = table.detach().clone().requires_grad_()
    out = function(index, leaf)
    (grad,) = torch.autograd.grad((out * upstream).sum(), leaf)
    reference_leaf = table.detach().clone().requires_grad_()
    expected = _reference(index, reference_leaf)
    (expected_grad,) = torch.autograd.grad((expected * upstream).sum(), reference_leaf)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, expected_grad)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 30), columns=st.integers(1, 5), vocabulary=st.integers(1, 8),
       width=st.integers(1, 6), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_equals_embedding_bag(rows, columns, vocabulary, width, seed, dtype):
    """Repeated rows (few table rows), no rows, one column; eager and the custom op."""
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, vocabulary, (rows, columns), generator=generator)
    table = torch.randn(vocabulary, width, generator=generator, dtype=dtype)
    _check_equal(embedding_sum, index, table, seed)
    _check_equal(embedding_sum_op, index, table, seed)


def test_gradcheck():
    generator = torch.Generator().manual_seed(0)
    index = torch.tensor([[0, 3], [2, 3], [0, 0], [1, 2]])
    table = torch.randn(4, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: embedding_sum(index, t), (table,))
    assert torch.autograd.gradcheck(lambda t: embedding_sum_op(index, t), (table,))


def test_compiled_equals_eager():
    generator = torch.Generator().manual_seed(1)
    index = torch.randint(0, 10, (50, 4), generator=generator)
    table = torch.randn(10, 6, generator=generator, dtype=torch.float64)
    compiled = torch.compile(embedding_sum, fullgraph=True, dynamic=False, backend="aot_eager")
    _check_equal(compiled, index, table)


@pytest.mark.parametrize("bad", [-1, 5])
def test_out_of_range_index_is_a_value_error(bad):
    index = torch.tensor([[0, 1], [2, bad]])
    table = torch.randn(5, 3)
    for function in (embedding_sum, embedding_sum_op):
        with pytest.raises(ValueError, match=r"must lie in \[0, 5\)"):
            function(index, table)


def test_rejects_unsupported_operands():
    with pytest.raises(ValueError, match=r"\[N, C\] int64 CPU index.*\(4,\) torch.int64"):
        embedding_sum(torch.zeros(4, dtype=torch.int64), torch.randn(5, 3))
    with pytest.raises(ValueError, match="torch.int32"):
        embedding_sum(torch.zeros(4, 2, dtype=torch.int32), torch.randn(5, 3))


def test_traced_atom_encoder_uses_the_sort_free_op():
    """Traced, the atom encoder (no table of all combinations) sums C rows per atom with
    `gnnforge::embedding_sum`, whose backward does not sort; embedding_bag's did (3.5x the
    time per packed batch of the main job)."""
    targets = []

    def record(graph_module, example_inputs):
        targets.extend(node.target for node in graph_module.graph.nodes)
        return graph_module

    encoder = FeatureEncoder(ATOM_FEATURE_DIMS, 8).double()
    generator = torch.Generator().manual_seed(2)
    features = torch.stack([torch.randint(0, v, (40,), generator=generator)
                            for v in ATOM_FEATURE_DIMS], 1)
    compiled = torch.compile(encoder, fullgraph=True, dynamic=False, backend=record)
    torch.testing.assert_close(compiled(features), encoder(features))
    assert torch.ops.gnnforge.embedding_sum.default in targets, targets
    assert F.embedding_bag not in targets
