"""`torch.library.opcheck` for every gnnforge custom op, fast backend and op family.

opcheck runs the op for real and under FakeTensor, checks the schema (no aliasing or
mutation it does not declare), the registered autograd and AOT dispatch: what
torch.compile relies on. A fake implementation that declares the wrong shape or dtype for
any output (as copy max/min's did for the operand it does not read) fails here.
"""

from __future__ import annotations

import pytest
import torch

from ._backends import CPU_FAST, NATIVE, backends_for
from .conftest import random_graph
from gnnforge.graph import Graph
import gnnforge.nn  # noqa: F401  (registers the fused GINE and embedding-sum ops)
from gnnforge.ops._graph_arrays import graph_arrays as _arrays

BACKENDS = [*CPU_FAST, "torch"]
SPMM_CASES = [(op, reduce)
              for op in ("copy_lhs", "copy_rhs", "add", "mul", "dot")
              for reduce in ("sum", "mean", "max", "min")
              if not (op == "dot" and reduce in ("max", "min"))]
SDDMM_CASES = [(op, targets)
               for op in ("add", "mul", "dot")
               for targets in (("u", "v"), ("e", "v"), ("u", "e"), ("v", "u"))]
# Every op the tests below cover; a newly registered op must be added with its cases.
# The Triton backend's ops (and gspmm/gsddmm on it) are opchecked in test_triton.py, which
# runs them through Triton's interpreter.
TRITON_OPS = {"gnnforge::triton_edge_softmax", "gnnforge::triton_edge_softmax_grad"}
COVERED = {"gnnforge::gspmm", "gnnforge::gsddmm", "gnnforge::gine_message_sum",
           "gnnforge::gine_message_sum_backward", "gnnforge::embedding_sum",
           "gnnforge::embedding_sum_backward", *TRITON_OPS}


def _operands(graph, op: str, seed: int, grad: bool = True, heads: int = 2, width: int = 3):
    """(lhs, rhs) in the padded shapes the ops receive: [N, H, D] and per-head edge data."""
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64,
                           requires_grad=grad)

    x = rand(graph.num_src_nodes, heads, width)
    # mul: per-head edge scalars (broadcast); add, dot, copy_rhs: full edge features.
    edge_width = 1 if op == "mul" else width
    weight = rand(graph.num_edges, heads, edge_width)
    return (None if op == "copy_rhs" else x), (None if op == "copy_lhs" else weight)


def _spmm_check(graph, backend, op, reduce, index_dtype=None, record_args=True, seed=0):
    arrays = _arrays(graph, index_dtype, csc=True, coo=True)
    # record_args=False promises that no gradient follows (a forward-only call).
    lhs, rhs = _operands(graph, op, seed, grad=record_args)
    torch.library.opcheck(torch.ops.gnnforge.gspmm.default,
                          (arrays, lhs, rhs, op, reduce, backend, record_args))


def _grid(cases):
    """(backend, op, second) triples: every backend for the copy ops, `OP_FAST` (and
    'torch') for the others, whose kernels test_native_binary.py runs on every variant."""
    return [(backend, op, second) for op, second in cases
            for backend in backends_for(op, BACKENDS)]


@pytest.mark.parametrize(("backend", "op", "reduce"), _grid(SPMM_CASES))
def test_gspmm_passes_opcheck(backend, op, reduce):
    _spmm_check(random_graph("square", seed=3, num_edges=40), backend, op, reduce)


@pytest.mark.parametrize(("backend", "op", "reduce"),
                         _grid([("copy_lhs", "max"), ("copy_rhs", "min"), ("mul", "max"),
                                ("add", "mean")]))
def test_gspmm_passes_opcheck_on_blocks_int64_and_empty_graphs(backend, op, reduce):
    _spmm_check(random_graph("bipartite", seed=4, num_edges=30), backend, op, reduce,
                index_dtype=torch.int64)
    empty = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 5)
    _spmm_check(empty, backend, op, reduce)


@pytest.mark.parametrize(("backend", "op", "_"),
                         _grid([("copy_lhs", None), ("copy_rhs", None), ("mul", None)]))
def test_gspmm_passes_opcheck_without_recorded_winners(backend, op, _):
    _spmm_check(random_graph("square", seed=5, num_edges=30), backend, op, "max",
                record_args=False)


@pytest.mark.parametrize(("backend", "op", "targets"), _grid(SDDMM_CASES))
def test_gsddmm_passes_opcheck(backend, op, targets):
    graph = random_graph("bipartite", seed=6, num_edges=30)
    arrays = _arrays(graph, None, csc=True, coo=True)
    generator = torch.Generator().manual_seed(1)
    rows = {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}
    lhs = torch.randn(rows[targets[0]], 2, 3, generator=generator, dtype=torch.float64,
                      requires_grad=True)
    rhs = torch.randn(rows[targets[1]], 2, 1 if op == "mul" else 3, generator=generator,
                      dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.gnnforge.gsddmm.default,
                          (arrays, lhs, rhs, op, *targets, backend))


# mkl runs copy_lhs sum/mean as torch.sparse.mm and hands everything else to numba's
# kernels: its own two, and one of each other path through it.
@pytest.mark.parametrize(("op", "reduce"), [("copy_lhs", "sum"), ("copy_lhs", "mean"),
                                            ("copy_lhs", "max"), ("mul", "sum")])
def test_gspmm_passes_opcheck_with_the_mkl_backend(op, reduce):
    _spmm_check(random_graph("square", seed=3, num_edges=40), "mkl", op, reduce)
    _spmm_check(random_graph("bipartite", seed=4, num_edges=30), "mkl", op, reduce,
                index_dtype=torch.int64)


def test_gsddmm_passes_opcheck_with_the_mkl_backend():
    graph = random_graph("bipartite", seed=6, num_edges=30)
    arrays = _arrays(graph, None, csc=True, coo=True)
    generator = torch.Generator().manual_seed(1)
    lhs = torch.randn(graph.num_src_nodes, 2, 3, generator=generator, dtype=torch.float64,
                      requires_grad=True)
    rhs = torch.randn(graph.num_dst_nodes, 2, 3, generator=generator, dtype=torch.float64,
                      requires_grad=True)
    torch.library.opcheck(torch.ops.gnnforge.gsddmm.default,
                          (arrays, lhs, rhs, "dot", "u", "v", "mkl"))


@pytest.mark.parametrize("backend", ["numba", *NATIVE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_gine_ops_pass_opcheck(dtype, backend):
    graph = random_graph("square", seed=8, num_edges=40)
    csr, csc = graph.csr(torch.int32), graph.csc(torch.int32)
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(graph.num_nodes, 5, generator=generator, dtype=dtype, requires_grad=True)
    table = torch.randn(7, 5, generator=generator, dtype=dtype, requires_grad=True)
    weight = torch.tensor([1.5], dtype=dtype, requires_grad=True)
    code = torch.randint(0, 7, (graph.num_edges,), generator=generator)
    torch.library.opcheck(torch.ops.gnnforge.gine_message_sum.default,
                          (x, table, weight, code, *csr, *csc, backend))
    grad = torch.randn(graph.num_nodes, 5, generator=generator, dtype=dtype)
    torch.library.opcheck(torch.ops.gnnforge.gine_message_sum_backward.default,
                          (grad, x.detach(), table.detach(), weight.detach(), code, *csr,
                           *csc, backend))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_sum_ops_pass_opcheck(dtype):
    generator = torch.Generator().manual_seed(3)
    index = torch.randint(0, 6, (9, 3), generator=generator)
    table = torch.randn(6, 4, generator=generator, dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.gnnforge.embedding_sum.default, (index, table))
    grad = torch.randn(9, 4, generator=generator, dtype=dtype)
    torch.library.opcheck(torch.ops.gnnforge.embedding_sum_backward.default, (grad, index, 6))


def test_max_without_recorded_winners_refuses_a_backward():
    graph = random_graph("square", seed=5, num_edges=30)
    arrays = _arrays(graph, None, csc=True, coo=True)
    x = torch.randn(graph.num_src_nodes, 3, requires_grad=True)
    out = torch.ops.gnnforge.gspmm(arrays, x, None, "copy_lhs", "max", CPU_FAST[0], False)[0]
    with pytest.raises(RuntimeError, match="record_args=False"):
        out.sum().backward()


def test_every_registered_gnnforge_op_is_covered():
    registered = {name for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("gnnforge::")}
    assert registered >= COVERED - TRITON_OPS  # the Triton ops register on first use
    assert registered <= COVERED, f"add opcheck cases for {sorted(registered - COVERED)}"
