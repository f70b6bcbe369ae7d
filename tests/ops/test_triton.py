"""The Triton backend equals the reference: every kernel, forward values and gradients.

Without a GPU the kernels run on CPU tensors through Triton's interpreter: this module
sets TRITON_INTERPRET=1 before gnnforge's Triton kernels are first imported (they are
loaded lazily, on the first 'triton' call). On a machine with CUDA the same tests run the
compiled kernels on the GPU instead, and the `gpu`-marked tests at the end add larger,
power-law graphs. The interpreter runs every program instance in Python, so the graphs
here are small (about ten rows); the load-balancing path (rows split into pieces and
combined) is reached with a hub row longer than a piece and with a tiny piece size.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton", reason="triton is not installed (pip install 'gnnforge[gpu]')")

import gnnforge.ops as ops  # noqa: E402
from gnnforge import BipartiteGraph, Graph  # noqa: E402
from gnnforge.ops import _dispatch  # noqa: E402
from gnnforge.ops._cpu import gspmm_cpu  # noqa: E402
from gnnforge.ops._triton import _spmm  # noqa: E402
from gnnforge.ops._triton._spmm import gspmm_triton  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if DEVICE.type == "cpu" and not _dispatch._devices("triton").count("cpu"):
    pytest.skip("TRITON_INTERPRET was set to something other than 1 before this module",
                allow_module_level=True)

# Both float types and both index types, alternated across cases to keep the run short.
PAIRS = [(torch.float32, torch.int32), (torch.float64, torch.int64)]


def _graph(seed: int, num_src: int = 11, num_dst: int = 9, num_edges: int = 26,
           square: bool = False):
    """Loops (square), multi-edges, and sources / destinations without edges."""
    generator = torch.Generator().manual_seed(seed)
    num_src = num_dst if square else num_src
    src = torch.randint(0, num_src - 2, (num_edges,), generator=generator)  # isolated tail
    dst = torch.randint(0, num_dst - 2, (num_edges,), generator=generator)
    src, dst = torch.cat([src, src[:4]]), torch.cat([dst, dst[:4]])          # multi-edges
    if square:
        loops = torch.arange(3)
        return Graph(torch.cat([src, loops]), torch.cat([dst, loops]), num_dst).to(DEVICE)
    return BipartiteGraph(src.to(DEVICE), dst.to(DEVICE), num_src, num_dst)


def _hub_graph(hub_edges: int = 1300):
    """Node 0 receives `hub_edges` edges (longer than a piece), the others a few or none."""
    generator = torch.Generator().manual_seed(5)
    src = torch.cat([torch.randint(0, 12, (hub_edges,), generator=generator),
                     torch.tensor([1, 2, 3, 3, 7])])
    dst = torch.cat([torch.zeros(hub_edges, dtype=torch.int64),
                     torch.tensor([1, 1, 4, 4, 9])])
    return Graph(src, dst, 12).to(DEVICE)


def _rows(graph, target: str) -> int:
    return {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}[target]


def _leaf(rows, shape, dtype, seed, positive=False):
    if shape is None:
        return None
    generator = torch.Generator().manual_seed(seed)
    data = torch.randn((rows, *shape), generator=generator, dtype=torch.float64)
    if positive:
        data = data.abs() + 0.5
    return data.to(dtype).to(DEVICE).requires_grad_()


def _tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)


def _forward_and_grads(backend, index_dtype, function, inputs):
    """Output and the gradient of sum(out * probe) w.r.t. every input, on one backend."""
    with ops.use_backend(backend, index_dtype=index_dtype):
        out = function(*inputs)
        probe = torch.linspace(-1, 2, out.numel(), dtype=out.dtype, device=out.device)
        grads = torch.autograd.grad((out * probe.reshape(out.shape)).sum(), inputs,
                                    allow_unused=True)
    return out, grads


def _check(function, inputs, dtype, index_dtype):
    """Triton vs reference: forward values, dtype, shape and every input's gradient."""
    inputs = tuple(t for t in inputs if t is not None)
    out, grads = _forward_and_grads("triton", index_dtype, function, inputs)
    expected, expected_grads = _forward_and_grads("reference", None, function, inputs)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, **_tolerance(dtype))
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, **_tolerance(want.dtype))


# ----------------------------------------------------------------------------- g-SpMM

# (op, reduces, lhs feature shape, rhs feature shape)
SPMM_CASES = [
    ("copy_lhs", ("sum", "mean", "max", "min"), (5,), None),
    ("copy_rhs", ("sum", "mean", "max", "min"), None, (3,)),
    ("mul", ("sum", "mean", "max", "min"), (4,), ()),          # edge scalar [E]
    ("mul", ("sum", "max"), (2, 3), (2, 1)),                  # per-head weights [E, H, 1]
    ("mul", ("sum", "min"), (3,), (3,)),                      # edge vectors [E, F]
    ("add", ("sum", "max"), (1, 3), (2, 1)),                  # two-sided broadcast
    ("sub", ("sum", "min"), (3,), (3,)),
    ("div", ("mean",), (3,), (1,)),
    ("dot", ("sum", "mean"), (2, 3), (2, 3)),
]


@pytest.mark.parametrize("case", SPMM_CASES, ids=lambda case: f"{case[0]}{case[2]}{case[3]}")
@pytest.mark.parametrize("square", [False, True], ids=["bipartite", "square"])
def test_gspmm_matches_reference(case, square):
    op, reduces, lhs_shape, rhs_shape = case
    dtype, index_dtype = PAIRS[(SPMM_CASES.index(case) + square) % 2]
    graph = _graph(SPMM_CASES.index(case), square=square)
    lhs = _leaf(graph.num_src_nodes, lhs_shape, dtype, 1)
    rhs = _leaf(graph.num_edges, rhs_shape, dtype, 2, positive=op == "div")
    for reduce in reduces:
        _check(lambda *t: ops.gspmm(graph, op, reduce, *_place(op, t)), (lhs, rhs), dtype,
               index_dtype)


def _place(op, tensors):
    if op == "copy_lhs":
        return tensors[0], None
    if op == "copy_rhs":
        return None, tensors[0]
    return tensors


@pytest.mark.parametrize(("dtype", "index_dtype"), PAIRS, ids=str)
def test_hub_row_split_into_pieces(dtype, index_dtype):
    """A row of 1300 in-edges is cut into pieces of PIECE_EDGES and combined in order."""
    assert 1300 > 2 * _spmm.PIECE_EDGES
    graph = _hub_graph()
    x = _leaf(graph.num_nodes, (3,), dtype, 3)
    weight = _leaf(graph.num_edges, (), dtype, 4)
    for reduce in ("sum", "mean", "max", "min"):
        _check(lambda a: ops.gspmm(graph, "copy_lhs", reduce, a), (x,), dtype, index_dtype)
    _check(lambda a, b: ops.u_mul_e_max(graph, a, b), (x, weight), dtype, index_dtype)


@pytest.mark.parametrize(("dtype", "index_dtype"), PAIRS, ids=str)
def test_winners_equal_the_cpu_kernels_with_every_row_split(monkeypatch, dtype, index_dtype):
    """Pieces of 2 entries split nearly every row; winners (ties from multi-edges included)
    are the same source node and edge id as the numba kernels record."""
    monkeypatch.setattr(_spmm, "PIECE_EDGES", 2)
    graph = _graph(8, num_edges=30, square=True)
    rowptr, col, eids = graph.csr(index_dtype)
    x = torch.randn(graph.num_nodes, 4, dtype=dtype)
    x[3] = x[4]  # equal values from different sources: the first in CSR order must win
    weight = torch.randn(graph.num_edges, 4, dtype=dtype)
    cpu = [t.cpu() for t in (rowptr, col, eids)]
    for op, lhs, rhs, reduce in (("copy_lhs", x, None, "sum"), ("copy_lhs", x, None, "max"),
                                 ("copy_rhs", None, weight, "mean"),
                                 ("copy_rhs", None, weight, "min"), ("add", x, weight, "max")):
        _compare_with_cpu(rowptr, col, eids, lhs, rhs, op, reduce, dtype)


def _compare_with_cpu(rowptr, col, eids, lhs, rhs, op, reduce, dtype):
    got = gspmm_triton(rowptr, col, eids, _to(lhs), _to(rhs), op, reduce)
    want = gspmm_cpu(rowptr.cpu(), col.cpu(), eids.cpu(), lhs, rhs, op, reduce)
    torch.testing.assert_close(got[0].cpu(), want[0], **_tolerance(dtype))
    for got_arg, want_arg in zip(got[1:], want[1:]):
        if want_arg.numel():
            assert torch.equal(got_arg.cpu(), want_arg)


def _to(tensor):
    return None if tensor is None else tensor.to(DEVICE)


def test_row_schedule_known_answer_and_cache():
    """Rows of degree 2, 0, 5 in pieces of 2: the third row becomes three items whose
    partials go to scratch rows 0-2; unused slots hold -1. Built once per rowptr."""
    from gnnforge.ops._triton._schedule import cached_row_schedule
    rowptr = torch.tensor([0, 2, 2, 7], device=DEVICE)
    schedule = cached_row_schedule(rowptr, 7, 2)
    expected = dict(item_row=[0, 1, 2, 2, 2, -1], item_start=[0, 2, 2, 4, 6, 8],
                    item_slot=[-1, -1, 0, 1, 2, -1], split_rows=[2, -1], first_slot=[0, 0, 0])
    for field, values in expected.items():
        assert getattr(schedule, field).tolist() == values, field
    assert schedule.num_slots == 7                          # the bound 2 * 7 // 2
    assert cached_row_schedule(rowptr, 7, 2) is schedule
    rowptr[1:] = torch.tensor([0, 0, 7])                    # changed in place: rebuilt
    assert cached_row_schedule(rowptr, 7, 2).item_row.tolist() == [0, 1, 2, 2, 2, 2]


def test_infinite_extremes_still_record_a_winner():
    """All messages -inf: the value is -inf and the first entry still wins (the gradient
    then reaches one source, where the reference would share it among the ties)."""
    graph = _graph(2, square=True)
    rowptr, col, eids = graph.csr(torch.int32)
    x = torch.full((graph.num_nodes, 2), float("-inf"))
    _compare_with_cpu(rowptr, col, eids, x, None, "copy_lhs", "max", torch.float32)


@st.composite
def _graphs_and_pieces(draw):
    num_nodes = draw(st.integers(1, 8))
    num_edges = draw(st.integers(0, 30))
    ends = st.lists(st.integers(0, num_nodes - 1), min_size=num_edges, max_size=num_edges)
    graph = Graph(torch.tensor(draw(ends), dtype=torch.int64),
                  torch.tensor(draw(ends), dtype=torch.int64), num_nodes).to(DEVICE)
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(num_nodes, draw(st.integers(1, 3)), generator=generator)
    return graph, x.to(DEVICE).requires_grad_(), draw(st.integers(1, 6))


@settings(max_examples=8, deadline=None)
@given(_graphs_and_pieces())
def test_arbitrary_graphs_and_piece_sizes(sample):
    """Any graph (empty, loops, multi-edges, isolated nodes) and any piece size: copy_u
    sum and max equal the reference, values and gradients."""
    graph, x, piece = sample
    with mock.patch.object(_spmm, "PIECE_EDGES", piece):
        for reduce in ("sum", "max"):
            _check(lambda a: ops.gspmm(graph, "copy_lhs", reduce, a), (x,), torch.float32,
                   torch.int32)


# ----------------------------------------------------------------------------- g-SDDMM

# (op, lhs target, rhs target, lhs feature shape, rhs feature shape)
SDDMM_CASES = [
    ("dot", "u", "v", (2, 4), (2, 4)),           # per-head attention logits [E, H, 1]
    ("add", "u", "v", (3,), (3,)),
    ("mul", "u", "e", (2, 3), (2, 1)),
    ("sub", "e", "v", (3,), (1,)),
    ("div", "v", "u", (3,), (3,)),
    ("mul", "e", "e", (3,), (3,)),
    ("dot", "e", "u", (1, 3), (2, 3)),          # broadcast heads inside a dot
    ("copy_lhs", "v", "u", (3,), None),
]


@pytest.mark.parametrize("case", SDDMM_CASES, ids=lambda case: "_".join(case[:3]))
def test_gsddmm_matches_reference(case):
    op, lhs_target, rhs_target, lhs_shape, rhs_shape = case
    dtype, index_dtype = PAIRS[SDDMM_CASES.index(case) % 2]
    graph = _graph(20 + SDDMM_CASES.index(case))
    lhs = _leaf(_rows(graph, lhs_target), lhs_shape, dtype, 3)
    rhs = _leaf(_rows(graph, rhs_target), rhs_shape, dtype, 4, positive=op == "div")
    _check(lambda *t: ops.gsddmm(graph, op, t[0], t[1] if len(t) > 1 else None, lhs_target,
                                 rhs_target), (lhs, rhs), dtype, index_dtype)


# ----------------------------------------------------------------------------- edge softmax


@pytest.mark.parametrize(("dtype", "index_dtype"), PAIRS, ids=str)
def test_edge_softmax_matches_reference(dtype, index_dtype):
    graph = _graph(31, square=True)
    logits = _leaf(graph.num_edges, (2, 1), dtype, 5)
    _check(lambda s: ops.edge_softmax(graph, s), (logits,), dtype, index_dtype)
    hub = _hub_graph()
    logits = _leaf(hub.num_edges, (), dtype, 6)
    _check(lambda s: ops.edge_softmax(hub, s), (logits,), dtype, index_dtype)


def test_edge_softmax_second_derivative():
    graph = _graph(32, num_edges=12, square=True)
    logits = _leaf(graph.num_edges, (2,), torch.float64, 7)

    def second(backend):
        with ops.use_backend(backend):
            out = ops.edge_softmax(graph, logits)
            first, = torch.autograd.grad(out.square().sum(), logits, create_graph=True)
            return torch.autograd.grad(first.pow(3).sum(), logits)[0]

    torch.testing.assert_close(second("triton"), second("reference"))


def test_edge_softmax_custom_ops_pass_opcheck():
    from gnnforge.ops._graph_arrays import graph_arrays as _arrays
    from gnnforge.ops._triton._edge_softmax import softmax_grad_op, softmax_op
    graph = _graph(33, num_edges=8, square=True)
    arrays = _arrays(graph, None, True, True)
    logits = torch.randn(graph.num_edges, 2, device=DEVICE, requires_grad=True)
    torch.library.opcheck(softmax_op, (arrays, logits))
    out = softmax_op(arrays, logits.detach())
    torch.library.opcheck(softmax_grad_op, (arrays, out, torch.randn_like(out)))


# ----------------------------------------------------------------------------- edge cases


def test_empty_graph_and_edgeless_graphs():
    empty = torch.zeros(0, dtype=torch.int64, device=DEVICE)
    for num_src, num_dst in ((0, 0), (0, 4), (3, 0), (3, 4)):
        graph = BipartiteGraph(empty, empty, num_src, num_dst)
        x = torch.randn(num_src, 5, device=DEVICE, requires_grad=True)
        weight = torch.randn(0, device=DEVICE, requires_grad=True)
        with ops.use_backend("triton"):
            outs = [ops.gspmm(graph, "copy_lhs", reduce, x)
                    for reduce in ("sum", "mean", "max", "min")]
            outs.append(ops.u_mul_e_sum(graph, x, weight))
            sum(out.sum() for out in outs).backward()
            assert ops.u_dot_v(graph, x, torch.randn(num_dst, 5, device=DEVICE)).shape == (0, 1)
            assert ops.edge_softmax(graph, weight).shape == (0,)
        for out in outs:
            assert torch.equal(out, torch.zeros(num_dst, 5, device=DEVICE))
        assert torch.equal(x.grad, torch.zeros(num_src, 5, device=DEVICE))
        assert weight.grad.shape == (0,)


def test_zero_width_features():
    graph = _graph(40)
    x = torch.randn(graph.num_src_nodes, 0, device=DEVICE)
    with ops.use_backend("triton"):
        assert ops.copy_u_max(graph, x).shape == (graph.num_dst_nodes, 0)
        assert ops.u_dot_v(graph, torch.randn(graph.num_src_nodes, 2, 0, device=DEVICE),
                           torch.randn(graph.num_dst_nodes, 2, 0, device=DEVICE)).shape == (
            graph.num_edges, 2, 1)


def test_non_contiguous_and_mixed_precision_inputs():
    graph = _graph(41)
    x = torch.randn(6, graph.num_src_nodes, device=DEVICE).t()[:, ::2]      # strided
    weight = torch.randn(graph.num_edges, 2, dtype=torch.float64, device=DEVICE)[:, 1]
    assert not x.is_contiguous() and not weight.is_contiguous()
    _check(lambda a, b: ops.u_mul_e_sum(graph, a, b), (x.requires_grad_(),
                                                        weight.requires_grad_()),
           torch.float64, None)


def test_bfloat16_is_accumulated_in_float32():
    graph = _graph(42)
    x = torch.randn(graph.num_src_nodes, 8, generator=torch.Generator().manual_seed(3))
    x = x.to(torch.bfloat16).to(DEVICE)
    with ops.use_backend("triton"):
        out = ops.copy_u_sum(graph, x)
    with ops.use_backend("reference"):
        expected = ops.copy_u_sum(graph, x.float())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.to(torch.bfloat16).float(), rtol=0, atol=0)


# (op, reduce, lhs feature shape, rhs feature shape) as the custom op receives them (after
# `pad_operands`): every copy reduction, and binary ops with scalar, vector and per-head
# edge features. Few cases: opcheck runs each op several times, in the interpreter here.
OPCHECK_SPMM = [
    ("copy_lhs", "sum", (2, 3), None),
    ("copy_lhs", "mean", (2, 3), None),
    ("copy_lhs", "max", (2, 3), None),
    ("copy_lhs", "min", (3,), None),
    ("copy_rhs", "min", None, (2, 3)),
    ("mul", "sum", (3,), (1,)),            # edge scalar ([E] padded to [E, 1])
    ("mul", "max", (3,), (3,)),            # edge vectors
    ("mul", "sum", (2, 3), (2, 1)),        # per-head edge weights
]


@pytest.mark.parametrize(("op", "reduce", "lhs_shape", "rhs_shape"), OPCHECK_SPMM,
                         ids=lambda value: str(value))
def test_spmm_custom_op_passes_opcheck(op, reduce, lhs_shape, rhs_shape):
    from gnnforge.ops._custom_ops import spmm_op
    from gnnforge.ops._graph_arrays import graph_arrays as _arrays
    graph = _graph(43, num_edges=8)
    arrays = _arrays(graph, torch.int64, True, True)
    x = _leaf(graph.num_src_nodes, lhs_shape, torch.float32, 1)
    weight = _leaf(graph.num_edges, rhs_shape, torch.float32, 2)
    torch.library.opcheck(spmm_op, (arrays, x, weight, op, reduce, "triton", True))


@pytest.mark.parametrize("op", ["dot", "add"])             # u_dot_v, u_add_v
def test_sddmm_custom_op_passes_opcheck(op):
    from gnnforge.ops._custom_ops import sddmm_op
    from gnnforge.ops._graph_arrays import graph_arrays as _arrays
    graph = _graph(44, num_edges=8)
    arrays = _arrays(graph, None, True, True)
    x = _leaf(graph.num_src_nodes, (2, 3), torch.float32, 3)
    y = _leaf(graph.num_dst_nodes, (2, 3), torch.float32, 4)
    torch.library.opcheck(sddmm_op, (arrays, x, y, op, "u", "v", "triton"))


# ----------------------------------------------------------------------------- dispatch


def test_cuda_tensors_default_to_triton_and_fall_back_to_torch(monkeypatch):
    assert _dispatch.choose("gspmm", torch.device("cuda")).backend == "triton"
    assert _dispatch.choose("gsddmm", torch.device("cuda")).backend == "triton"
    monkeypatch.setitem(_dispatch._FALLBACKS, "triton", ("torch", lambda: False))
    assert _dispatch.choose("gspmm", torch.device("cuda")).backend == "torch"


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with ops.use_backend("triton"), pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        _dispatch.choose("gspmm", torch.device("cpu"))


def test_missing_triton_names_the_extra(monkeypatch):
    monkeypatch.setattr(_dispatch, "triton_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"gnnforge\[gpu\]"):
        with ops.use_backend("triton"):
            pass


def test_compiled_kernels_refuse_cpu_tensors():
    """Kernels defined without TRITON_INTERPRET (compiled) name the fix for CPU tensors."""
    from triton.runtime.jit import JITFunction

    from gnnforge.ops._triton._launch import check_runnable

    def kernel(pointer):
        pass

    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        check_runnable(JITFunction(kernel), torch.zeros(1))


# ----------------------------------------------------------------------------- GPU only


def _power_law_graph(scale: int, edges: int, seed: int):
    from gnnforge.data import rmat
    return rmat(scale, edges, seed=seed).to("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpu_default_dispatch_matches_reference_on_rmat(dtype):
    graph = _power_law_graph(12, 60_000, seed=1)          # hub rows of thousands of edges
    x = torch.randn(graph.num_nodes, 4, 16, dtype=dtype, device="cuda", requires_grad=True)
    weight = torch.rand(graph.num_edges, 4, 1, dtype=dtype, device="cuda", requires_grad=True)
    functions = [
        lambda: ops.copy_u_sum(graph, x), lambda: ops.copy_u_mean(graph, x),
        lambda: ops.copy_u_max(graph, x), lambda: ops.u_mul_e_sum(graph, x, weight),
        lambda: ops.u_mul_e_min(graph, x, weight),
        lambda: ops.edge_softmax(graph, ops.u_dot_v(graph, x, x)),
    ]
    assert _dispatch.choose("gspmm", x.device).backend == "triton"
    for function in functions:
        out = function()
        grads = torch.autograd.grad(out.square().sum(), (x, weight), allow_unused=True)
        with ops.use_backend("reference"):
            expected = function()
            expected_grads = torch.autograd.grad(expected.square().sum(), (x, weight),
                                                 allow_unused=True)
        tolerance = dict(rtol=1e-4, atol=1e-3) if dtype == torch.float32 else {}
        torch.testing.assert_close(out, expected, **tolerance)
        for got, want in zip(grads, expected_grads):
            if want is not None:
                torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.gpu
def test_gpu_bfloat16_sum_and_softmax():
    graph = _power_law_graph(10, 8_000, seed=2)
    x = torch.randn(graph.num_nodes, 32, device="cuda").to(torch.bfloat16)
    logits = torch.randn(graph.num_edges, 4, device="cuda").to(torch.bfloat16)
    out = ops.copy_u_sum(graph, x)
    attention = ops.edge_softmax(graph, logits)
    with ops.use_backend("reference"):
        expected = ops.copy_u_sum(graph, x.float())
        expected_attention = ops.edge_softmax(graph, logits.float())
    assert out.dtype == attention.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(attention.float(), expected_attention, rtol=1e-2, atol=1e-2)
