"""The native binary-reduce g-SpMM, g-SDDMM and edge softmax kernels equal the reference.

Every instruction-set variant the host can run is forced in turn (backend 'native:VARIANT'),
with float32 and float64, int32 and int64 indices (every pair on the first and the widest
build, one pair on the builds between, which compile the first's source), and
every broadcasting case the layers use: vector [E, F], edge scalar [E] / [E, 1], per-head
[E, H, 1] x [N, H, D] (D a whole number of SIMD vectors or not), scalar node data with
vector edge data (the swapped layout), a two-sided broadcast, and one that falls back to
numba. Widths reach the 8/4/2/1-vector blocks and the scalar tail of `binary.cpp`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnforge.ops as ops
from gnnforge.graph import Graph
from gnnforge.ops import _cpu, _native_binary, _native_build
from gnnforge.ops._native import available
from gnnforge.ops._native_binary import gspmm_binary_native, plan_layout

from .conftest import random_graph

pytestmark = pytest.mark.skipif(not available(), reason="native kernels unavailable here")

VARIANTS = [variant.name for variant in _native_build.available_variants()]
DTYPES = [(torch.float32, torch.int32), (torch.float64, torch.int64),
          (torch.float32, torch.int64), (torch.float64, torch.int32)]
REDUCES = ("sum", "mean", "max", "min")

# (lhs features, rhs features): node data x[u] against edge data e.
SPMM_CASES = [
    ((5,), (5,)),              # vector, scalar tail only
    ((2,), (1,)),              # edge scalar, a row narrower than a vector (compile-time width)
    ((8,), ()),                # edge scalar, 8 columns: narrow under 64-byte vectors
    ((1,), (1,)),              # one column each
    ((40,), (40,)),            # vector, 2 (zmm) or 5 (ymm) vectors + tail
    ((130,), (130,)),          # vector, an 8-vector block, smaller blocks, tail
    ((64,), ()),               # edge scalar [E]
    ((33,), (1,)),             # edge scalar [E, 1], tail
    ((4, 16), (4, 1)),         # per-head, D a whole number of vectors: whole rows
    ((3, 5), (3, 1)),          # per-head, D = 5: head by head with scalar tails
    ((2, 20), (2, 20)),        # [N, H, D] x [E, H, D]
    ((1,), (24,)),             # node scalar, edge vector: operands swapped
    ((1, 8), (4, 1)),          # two-sided: [N, 1, D] + [E, H, 1]
    ((2, 1, 3), (1, 4, 1)),    # three broadcast groups: numba's kernel
]
# (op, lhs target, rhs target, lhs features, rhs features)
SDDMM_CASES = [
    ("dot", "u", "v", (4, 16), (4, 16)),    # per-head dot (GAT scores)
    ("dot", "u", "v", (37,), (37,)),        # one head, tail
    ("add", "u", "v", (4, 1), (4, 1)),      # GAT's score_src + score_dst
    ("add", "u", "v", (4, 8), (4, 8)),      # GATv2
    ("sub", "e", "v", (3, 5), (3, 1)),      # per-head broadcast, head by head
    ("mul", "u", "v", (1,), (1,)),          # GCN's d_u^-1/2 d_v^-1/2
    ("div", "e", "v", (64,), (64,)),        # e_div_v
    ("mul", "e", "u", (4, 1), (4, 16)),     # swapped: scalar per head times vector
    ("mul", "u", "e", (2, 1, 3), (1, 4, 1)),  # three groups: numba's kernel
    ("dot", "v", "e", (2, 1, 3), (1, 4, 3)),  # dot with two head groups: numba's kernel
]


@pytest.fixture(params=VARIANTS)
def variant(request):
    """The backend name that runs every native kernel on one instruction-set build."""
    return f"native:{request.param}"


def _variants_and_dtypes():
    """(backend, dtype, index dtype) for the kernel grids below. The builds between the
    first and the widest compile the same source as the first (32-byte vectors; only the
    widest has 64-byte ones, under AVX-512) with other instructions: they run one dtype pair,
    the first and the widest run every pair."""
    return [pytest.param(f"native:{name}", dtype, index_dtype,
                         id=f"{name}-{str(dtype)[6:]}-{str(index_dtype)[6:]}")
            for position, name in enumerate(VARIANTS)
            for dtype, index_dtype in (DTYPES if position in (0, len(VARIANTS) - 1)
                                       else DTYPES[:1])]


def _data(rows, shape, dtype, seed, positive=False):
    generator = torch.Generator().manual_seed(seed)
    data = torch.randn((rows, *shape), generator=generator, dtype=torch.float64)
    if positive:
        data = data.abs() + 0.5
    return data.to(dtype)


def _tolerance(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == torch.float32 else dict(rtol=1e-10,
                                                                            atol=1e-10)


def _forward_and_grads(backend, index_dtype, call, inputs, seed=3):
    leaves = [t.clone().requires_grad_() for t in inputs]
    with ops.use_backend(backend, index_dtype=index_dtype):
        out = call(*leaves)
        upstream = _data(out.shape[0], tuple(out.shape[1:]), out.dtype, seed)
        grads = torch.autograd.grad(out, leaves, upstream, allow_unused=True)
    return out, grads


def _check(call, inputs, dtype, index_dtype, backend):
    expected = _forward_and_grads("reference", None, call, inputs)
    actual = _forward_and_grads(backend, index_dtype, call, inputs)
    assert actual[0].shape == expected[0].shape and actual[0].dtype == expected[0].dtype
    torch.testing.assert_close(actual[0], expected[0], **_tolerance(dtype))
    for got, want in zip(actual[1], expected[1]):
        torch.testing.assert_close(got, want, **_tolerance(dtype))


@pytest.mark.parametrize("variant,dtype,index_dtype", _variants_and_dtypes())
@pytest.mark.parametrize("lhs_shape,rhs_shape", SPMM_CASES)
def test_binary_spmm_forward_and_gradients(variant, lhs_shape, rhs_shape, dtype, index_dtype):
    for kind in ("square", "bipartite"):
        graph = random_graph(kind, seed=11)
        for op in ("add", "sub", "mul", "div"):
            x = _data(graph.num_src_nodes, lhs_shape, dtype, 1)
            e = _data(graph.num_edges, rhs_shape, dtype, 2, positive=op == "div")
            for reduce in REDUCES:
                _check(lambda a, b, op=op, r=reduce: ops.gspmm(graph, op, r, a, b), (x, e),
                       dtype, index_dtype, variant)


# Rows of 1, 2, 4 and 8 whole vectors for every vector length (4 and 8 doubles, 8 and 16
# floats): the contiguous sum/mean kernel of `binary.cpp`, also with heads laid out back to
# back in both operands ([N, H, D] x [E, H, D], D smaller than a vector at (2, 4)).
CONTIGUOUS_SHAPES = [(4,), (8,), (16,), (32,), (64,), (128,), (4, 16), (2, 4)]


@pytest.mark.parametrize("variant,dtype,index_dtype", _variants_and_dtypes())
@pytest.mark.parametrize("shape", CONTIGUOUS_SHAPES)
def test_contiguous_sum_and_mean_rows(variant, shape, dtype, index_dtype):
    # Square and bipartite graphs with isolated (zero-degree) rows, loops and multi-edges,
    # and a graph without edges; every gradient (the source one is the same kernel on the
    # CSC).
    empty = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 6)
    for graph in (random_graph("square", seed=12), random_graph("bipartite", seed=13), empty):
        x = _data(graph.num_src_nodes, shape, dtype, 1)
        e = _data(graph.num_edges, shape, dtype, 2)
        for op in ("mul", "add"):
            for reduce in ("sum", "mean"):
                _check(lambda a, b, op=op, r=reduce: ops.gspmm(graph, op, r, a, b), (x, e),
                       dtype, index_dtype, variant)


@pytest.mark.parametrize("variant,dtype,index_dtype", _variants_and_dtypes())
@pytest.mark.parametrize("op,lhs_target,rhs_target,lhs_shape,rhs_shape", SDDMM_CASES)
def test_sddmm_forward_and_gradients(variant, op, lhs_target, rhs_target, lhs_shape,
                                     rhs_shape, dtype, index_dtype):
    for kind in ("square", "bipartite"):
        graph = random_graph(kind, seed=12)
        rows = {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}
        x = _data(rows[lhs_target], lhs_shape, dtype, 1)
        y = _data(rows[rhs_target], rhs_shape, dtype, 2, positive=op == "div")
        _check(lambda a, b: ops.gsddmm(graph, op, a, b, lhs_target, rhs_target), (x, y),
               dtype, index_dtype, variant)


@pytest.mark.parametrize("variant,dtype,index_dtype", _variants_and_dtypes())
@pytest.mark.parametrize("shape", [(), (4,), (4, 1), (3, 5), (19,)])
def test_edge_softmax_forward_and_gradient(variant, shape, dtype, index_dtype):
    for kind in ("square", "bipartite"):
        graph = random_graph(kind, seed=13)
        logits = _data(graph.num_edges, shape, dtype, 4) * 4
        _check(lambda s: ops.edge_softmax(graph, s), (logits,), dtype, index_dtype, variant)


def test_the_layouts_cover_the_layers_cases():
    assert plan_layout("mul", (64,), (1,)) == (1, 64, False, 0, 0, False)      # edge scalar
    assert plan_layout("mul", (4, 16), (4, 1)) == (4, 16, False, 16, 1, False)  # per head
    assert plan_layout("mul", (1,), (24,)) == (1, 24, True, 0, 0, False)       # swapped
    assert plan_layout("add", (1, 8), (4, 1)) == (4, 8, False, 0, 1, False)    # two-sided
    assert plan_layout("dot", (4, 16), (4, 16)) == (4, 16, False, 16, 16, True)
    assert plan_layout("mul", (2, 1, 3), (1, 4, 1)) is None                    # numba's


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_winners_are_in_the_index_dtype_and_ties_keep_the_first_edge(variant, reduce,
                                                                      index_dtype):
    graph = random_graph("square", seed=14)
    rowptr, col, eids = graph.csr(index_dtype)
    # Small integers: many ties, which keep the first entry of the row as numba's kernel does.
    generator = torch.Generator().manual_seed(5)
    for lhs_shape, rhs_shape in [((6,), (6,)), ((2, 8), (2, 1)), ((1,), (12,)), ((3, 5), (3, 1))]:
        x = torch.randint(0, 3, (graph.num_nodes, *lhs_shape), generator=generator).float()
        e = torch.randint(0, 3, (graph.num_edges, *rhs_shape), generator=generator).float()
        for op in ("add", "mul"):
            out, arg_x, arg_e = gspmm_binary_native(rowptr, col, eids, x, e, op, reduce,
                                                    variant=variant.split(":")[1])
            want, want_x, want_e = _cpu.gspmm_cpu(rowptr, col, eids, x, e, op, reduce)
            assert arg_x.dtype == arg_e.dtype == index_dtype
            torch.testing.assert_close(out, want)
            assert torch.equal(arg_x.long(), want_x) and torch.equal(arg_e.long(), want_e)


@pytest.mark.parametrize("reduce", REDUCES)
def test_graph_without_edges_forward_and_backward(variant, reduce):
    graph = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 5)
    x = torch.randn(5, 4, 8, requires_grad=True)
    w = torch.randn(0, 4, 1, requires_grad=True)
    with ops.use_backend(variant):
        out = ops.u_mul_e_sum(graph, x, w) if reduce == "sum" else \
            ops.gspmm(graph, "add", reduce, x, w)
        out.sum().backward()
        scores = ops.u_dot_v(graph, x, x)
        attention = ops.edge_softmax(graph, scores.detach().requires_grad_())
    assert torch.equal(out, torch.zeros(5, 4, 8))
    assert torch.equal(x.grad, torch.zeros_like(x)) and w.grad.shape == (0, 4, 1)
    assert scores.shape == attention.shape == (0, 4, 1)


def test_gradcheck_float64(variant):
    graph = random_graph("square", seed=15, num_edges=30)
    n, m = graph.num_nodes, graph.num_edges
    x = _data(n, (2, 3), torch.float64, 1).requires_grad_()
    head = _data(m, (2, 1), torch.float64, 2).requires_grad_()
    vector = _data(m, (2, 3), torch.float64, 3).requires_grad_()
    with ops.use_backend(variant):
        for reduce in REDUCES:
            for op in ("mul", "add", "div"):
                for e in (head, vector):
                    assert torch.autograd.gradcheck(
                        lambda a, b, op=op, r=reduce: ops.gspmm(graph, op, r, a, b), (x, e))
        assert torch.autograd.gradcheck(lambda a, b: ops.u_dot_v(graph, a, b), (x, x))
        assert torch.autograd.gradcheck(lambda a, b: ops.e_div_v(graph, a, b),
                                        (vector, (x.detach().abs() + 1).requires_grad_()))
        assert torch.autograd.gradcheck(lambda s: ops.edge_softmax(graph, s), (head,))
        assert torch.autograd.gradgradcheck(lambda s: ops.edge_softmax(graph, s), (head,))
        assert torch.autograd.gradgradcheck(lambda a, b: ops.u_mul_e_sum(graph, a, b),
                                            (x, head))


def test_multi_threaded_calls_equal_the_reference(variant):
    # Past the parallel threshold (2^18 multiply-adds): the OpenMP paths.
    generator = torch.Generator().manual_seed(0)
    graph = Graph(torch.randint(0, 3000, (40_000,), generator=generator),
                  torch.randint(0, 3000, (40_000,), generator=generator), 3000)
    x = _data(3000, (4, 16), torch.float32, 1)
    w = _data(40_000, (4, 1), torch.float32, 2)
    for reduce in REDUCES:
        _check(lambda a, b, r=reduce: ops.gspmm(graph, "mul", r, a, b), (x, w), torch.float32,
               None, variant)
    _check(lambda a, b: ops.u_dot_v(graph, a, b), (x, x), torch.float32, None, variant)
    _check(lambda s: ops.edge_softmax(graph, s), (w,), torch.float32, None, variant)


@pytest.mark.parametrize("dtype,index_dtype", DTYPES[:2])
def test_edge_outputs_past_the_cache_take_the_streaming_store_path(variant, dtype,
                                                                   index_dtype):
    # [70_000, 64] edge outputs are >= 16 MiB (kStreamBytes): u_add_v's forward and the
    # [E, F] edge gradient of u_mul_e are written with non-temporal stores (whole vectors
    # per head), and so are u_mul_e_sum's node outputs (forward and source gradient: the
    # contiguous kernel streams its output once output + edge rows reach 16 MiB); a width
    # of 65 has a scalar tail and uses ordinary stores; zero-degree destinations (2_900 and
    # up) and int32/int64 indices on the way.
    generator = torch.Generator().manual_seed(7)
    graph = Graph(torch.randint(0, 3_000, (70_000,), generator=generator),
                  torch.randint(0, 2_900, (70_000,), generator=generator), 3_000)
    for shape in ((64,), (4, 16), (65,)):
        x = _data(3_000, shape, dtype, 1)
        e = _data(70_000, shape, dtype, 2)
        _check(lambda a, b: ops.u_add_v(graph, a, b), (x, x), dtype, index_dtype, variant)
        _check(lambda a, b: ops.u_mul_e_sum(graph, a, b), (x, e), dtype, index_dtype, variant)


@st.composite
def _samples(draw):
    num_nodes = draw(st.integers(1, 9))
    num_edges = draw(st.integers(0, 40))
    ends = st.lists(st.integers(0, num_nodes - 1), min_size=num_edges, max_size=num_edges)
    src, dst = draw(ends), draw(ends)
    graph = Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64),
                  num_nodes)
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    return graph, dtype, draw(st.integers(0, 2**16)), draw(st.sampled_from(VARIANTS))


@settings(max_examples=60, deadline=None)
@given(_samples(), st.sampled_from(SPMM_CASES[:-1]), st.sampled_from(("add", "mul", "sub")),
       st.sampled_from(REDUCES))
def test_arbitrary_graphs_spmm(sample, case, op, reduce):
    graph, dtype, seed, name = sample
    x = _data(graph.num_nodes, case[0], dtype, seed)
    e = _data(graph.num_edges, case[1], dtype, seed + 1)
    _check(lambda a, b: ops.gspmm(graph, op, reduce, a, b), (x, e), dtype, None,
           f"native:{name}")


@settings(max_examples=40, deadline=None)
@given(_samples(), st.sampled_from([(), (3,), (2, 1), (2, 9)]))
def test_arbitrary_graphs_sddmm_and_softmax(sample, shape):
    graph, dtype, seed, name = sample
    x = _data(graph.num_nodes, (*shape, 5) if shape else (5,), dtype, seed)
    logits = _data(graph.num_edges, shape, dtype, seed + 1) * 3
    backend = f"native:{name}"
    _check(lambda a, b: ops.u_dot_v(graph, a, b), (x, x), dtype, None, backend)
    _check(lambda a, b: ops.u_add_v(graph, a, b), (x, x), dtype, None, backend)
    _check(lambda s: ops.edge_softmax(graph, s), (logits,), dtype, None, backend)


def test_half_precision_is_computed_in_float32():
    graph = random_graph("square", seed=16)
    x = _data(graph.num_nodes, (8,), torch.float32, 1)
    w = _data(graph.num_edges, (1,), torch.float32, 2)
    with ops.use_backend("native"):
        out = ops.u_mul_e_sum(graph, x.bfloat16(), w.bfloat16())
        scores = ops.u_dot_v(graph, x.bfloat16(), x.bfloat16())
        attention = ops.edge_softmax(graph, w.bfloat16())
    with ops.use_backend("reference"):
        want = ops.u_mul_e_sum(graph, x.bfloat16().float(), w.bfloat16().float())
        want_scores = ops.u_dot_v(graph, x.bfloat16().float(), x.bfloat16().float())
        want_attention = ops.edge_softmax(graph, w.bfloat16().float())
    assert out.dtype == scores.dtype == attention.dtype == torch.bfloat16
    torch.testing.assert_close(out, want.bfloat16())
    torch.testing.assert_close(scores, want_scores.bfloat16())
    torch.testing.assert_close(attention, want_attention.bfloat16())


def _counting(monkeypatch, module, name, counts):
    original = getattr(module, name)

    def counted(*args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)


def test_attention_weighted_and_gine_layers_run_on_the_native_kernels(monkeypatch):
    from gnnforge.nn import GATConv, GATv2Conv, GCNConv, GINEConv
    from gnnforge.nn import _gine_message
    from gnnforge.nn._aggregate import weighted_neighbor_sum
    from gnnforge.ops import _edge_softmax

    def numba_reached(*args, **kwargs):
        raise AssertionError("the numba fallback was called")

    for module, name in ((_cpu, "gspmm_cpu"), (_cpu, "gsddmm_cpu"),
                         (_gine_message, "_forward"), (_gine_message, "_backward")):
        monkeypatch.setattr(module, name, numba_reached)
    counts: dict[str, int] = {}
    for module, name in ((_native_binary, "gspmm_binary_native"),
                         (_native_binary, "gsddmm_binary_native"),
                         (_edge_softmax, "edge_softmax_native"),
                         (_edge_softmax, "edge_softmax_backward_native"),
                         (_gine_message, "gine_forward_native"),
                         (_gine_message, "gine_backward_native")):
        _counting(monkeypatch, module, name, counts)
    graph = random_graph("square", seed=17)
    torch.manual_seed(0)
    x = torch.randn(graph.num_nodes, 12, requires_grad=True)
    weight = torch.rand(graph.num_edges, requires_grad=True)
    edge_attr = torch.randn(graph.num_edges, 12, requires_grad=True)
    with ops.use_backend("native"):
        for layer in (GATConv(12, 4, heads=3), GATv2Conv(12, 4, heads=3), GCNConv(12, 8)):
            layer(graph, x).square().sum().backward()
        weighted_neighbor_sum(graph, x, weight).square().sum().backward()
        GINEConv(torch.nn.Linear(12, 12))(graph, x, edge_attr).square().sum().backward()
    assert {"gspmm_binary_native", "gsddmm_binary_native", "edge_softmax_native",
            "edge_softmax_backward_native", "gine_forward_native",
            "gine_backward_native"} <= set(counts)
    assert weight.grad is not None and edge_attr.grad is not None


@pytest.mark.parametrize("code", [False, True])
@pytest.mark.parametrize("dtype,index_dtype", DTYPES[:2])
def test_fused_gine_equals_numba(variant, code, dtype, index_dtype):
    from gnnforge.nn import _gine_message
    for kind, width in (("square", 5), ("bipartite", 40)):
        graph = random_graph(kind, seed=18)
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(graph.num_src_nodes, width, generator=generator, dtype=dtype)
        rows = 7 if code else graph.num_edges
        table = torch.randn(rows, width, generator=generator, dtype=dtype)
        codes = torch.randint(0, 7, (graph.num_edges,), generator=generator) if code else None
        scale = torch.tensor([1.5], dtype=dtype)
        upstream = torch.randn(graph.num_dst_nodes, width, generator=generator, dtype=dtype)
        results = []
        for backend in ("numba", variant):
            leaves = [t.clone().requires_grad_() for t in (x, table, scale)]
            with ops.use_backend(backend, index_dtype=index_dtype):
                out = _gine_message.gine_message_sum(graph, *leaves[:2], codes, leaves[2])
                results.append((out, *torch.autograd.grad(out, leaves, upstream)))
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got, want, **_tolerance(dtype))
