"""The XLA forms of the reference's max/min and degrees equal the reference on the CPU:
one `scatter_reduce` from the identity (`_static_extreme`), degrees as CSR pointer
differences (`_degree`)."""

from __future__ import annotations

import pytest
import torch

from gnnforge.graph import Graph
from gnnforge.ops._degree import _pointer_differences, in_degree, out_degree
from gnnforge.ops._reference import _extreme_ref
from gnnforge.ops._static_extreme import extreme_static


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_one_scatter_from_the_identity_equals_the_reference(reduce):
    generator = torch.Generator().manual_seed(0)
    dst = torch.tensor([0, 0, 2, 2, 2, 4])                  # rows 1 and 3 have no edge
    message = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    message[1] = message[0]                                 # a tie in row 0
    message[3, 0] = 0.0                                     # a zero result in row 2
    message[2, 0] = message[4, 0] = -1.0 if reduce == "amax" else 1.0
    shape = (5, 3)
    ours = message.clone().requires_grad_()
    theirs = message.clone().requires_grad_()
    out, expected = extreme_static(dst, ours, shape, reduce), _extreme_ref(dst, theirs, shape,
                                                                          reduce)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    weight = torch.randn(shape, generator=generator, dtype=torch.float64)
    (out * weight).sum().backward()
    (expected * weight).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=0, atol=0)


def test_pointer_differences_are_the_degrees():
    graph = Graph(torch.tensor([0, 0, 1, 3, 3, 3]), torch.tensor([1, 2, 2, 0, 2, 2]), 5)
    assert _pointer_differences(graph.csr()[0]).tolist() == in_degree(graph).tolist() == \
        [1, 1, 4, 0, 0]
    assert _pointer_differences(graph.csc()[0]).tolist() == out_degree(graph).tolist() == \
        [2, 1, 0, 3, 0]
