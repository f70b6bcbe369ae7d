"""The native (C++) kernels equal the reference, and gnnforge falls back to numba without them.

Widths cover every code path of `_native_src/spmm.cpp`: rows narrower than one vector
(F=1-7 float32 and 1-3 float64: a compile-time count per width), tail vectors (F not a
multiple of the vector: the last block's overlapping vector), 1-8 register vectors, several feature blocks, and wide
rows whose in-edges are walked in L1-sized tiles (F=300 float64: 6 edges per tile, so the
hub rows below cross tiles).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnforge.ops as ops
from gnnforge.graph import Graph
from gnnforge.ops._native import available
from tests._timeouts import SUBPROCESS_TIMEOUT_S

pytestmark = pytest.mark.skipif(not available(), reason="native kernels unavailable here")

REDUCES = ("sum", "mean", "max", "min")
# Narrow rows (under one vector), tail vectors, 1-8 register vectors, several blocks, L1
# tiles; for the 64-byte (zmm) sum path taken when a row holds one 64-byte vector: 2 + a
# tail (33), 3 vectors (48), 4 + a tail (65), 10 vectors split 8 + 2 (160), a whole-row
# block of 16 (256), 16 + 1 (272), 16 + 2 + a tail (300), tiled (512).
WIDTHS = (1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 48, 64, 65, 100, 160, 256, 272, 300, 512)


def _hub_graph(seed: int, num_nodes: int = 40, num_edges: int = 400) -> Graph:
    """Skewed in-degrees (node 0 gets a third of the edges), loops, multi-edges, isolated."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes - 2, (num_edges,), generator=generator)
    dst = torch.randint(0, num_nodes - 3, (num_edges,), generator=generator)
    dst[: num_edges // 3] = 0
    src = torch.cat([src, src[:20], torch.arange(5)])
    dst = torch.cat([dst, dst[:20], torch.arange(5)])
    return Graph(src, dst, num_nodes)


def _assert_close(actual, expected, graph, scale):
    """Equal up to float rounding of a sum of at most max-degree terms of size <= scale."""
    if actual.dtype != torch.float32:
        torch.testing.assert_close(actual, expected)
        return
    degrees = torch.cat([torch.bincount(end, minlength=graph.num_nodes) for end in graph.coo()])
    terms = int(degrees.max()) if degrees.numel() else 1
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6 * terms * float(scale.detach()) if torch.is_tensor(scale) else scale)


def _both(call, index_dtype=None):
    with ops.use_backend("reference"):
        expected = call()
    with ops.use_backend("native", index_dtype=index_dtype):
        actual = call()
    return actual, expected


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("dtype", "index_dtype"),
                         [(torch.float32, torch.int32), (torch.float64, torch.int64)], ids=str)
def test_copy_reduce_forward_and_gradient(width, dtype, index_dtype):
    graph = _hub_graph(width)
    x = torch.randn(graph.num_nodes, width, dtype=dtype,
                    generator=torch.Generator().manual_seed(1)).requires_grad_()
    grad = torch.randn(graph.num_nodes, width, dtype=dtype)
    for reduce in REDUCES:
        with ops.use_backend("reference"):
            expected = ops.gspmm(graph, "copy_lhs", reduce, x)
            expected_grad, = torch.autograd.grad(expected, x, grad)
        with ops.use_backend("native", index_dtype=index_dtype):
            actual = ops.gspmm(graph, "copy_lhs", reduce, x)
            actual_grad, = torch.autograd.grad(actual, x, grad)
        _assert_close(actual, expected, graph, x.abs().max())
        _assert_close(actual_grad, expected_grad, graph, grad.abs().max())


@pytest.mark.parametrize("reduce", REDUCES)
def test_copy_e_and_non_contiguous_and_half(reduce):
    graph = _hub_graph(3)
    wide = torch.randn(graph.num_edges, 2 * 37, generator=torch.Generator().manual_seed(2))
    edge_data = wide[:, ::2]                                    # non-contiguous [E, 37]
    actual, expected = _both(lambda: ops.gspmm(graph, "copy_rhs", reduce, None, edge_data))
    _assert_close(actual, expected, graph, edge_data.abs().max())
    x = torch.randn(20, graph.num_nodes, generator=torch.Generator().manual_seed(3)).t()
    actual, expected = _both(lambda: ops.gspmm(graph, "copy_lhs", reduce, x))
    _assert_close(actual, expected, graph, x.abs().max())
    half = x.to(torch.bfloat16)
    actual, expected = _both(lambda: ops.gspmm(graph, "copy_lhs", reduce, half))
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual.float(), expected.float(), rtol=2e-2, atol=5e-2)


def test_empty_graph_and_zero_width():
    graph = Graph(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), 6)
    for reduce in REDUCES:
        actual, expected = _both(lambda: ops.copy_u_sum(graph, torch.randn(6, 9)))
        torch.testing.assert_close(actual, expected)
        with ops.use_backend("native"):
            assert ops.gspmm(graph, "copy_lhs", reduce, torch.randn(6, 0)).shape == (6, 0)


def test_gradcheck_float64():
    graph = _hub_graph(5, num_nodes=12, num_edges=50)
    x = torch.randn(12, 11, dtype=torch.float64, requires_grad=True)
    for reduce in REDUCES:
        with ops.use_backend("native"):
            assert torch.autograd.gradcheck(
                lambda a, r=reduce: ops.gspmm(graph, "copy_lhs", r, a), (x,))


@st.composite
def _graphs(draw):
    num_nodes = draw(st.integers(1, 10))
    num_edges = draw(st.integers(0, 60))
    ends = st.lists(st.integers(0, num_nodes - 1), min_size=num_edges, max_size=num_edges)
    src, dst = draw(ends), draw(ends)
    width = draw(st.sampled_from(WIDTHS))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(num_nodes, width, generator=torch.Generator().manual_seed(seed),
                    dtype=dtype)
    return Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64),
                 num_nodes), x, draw(st.sampled_from(REDUCES))


@settings(max_examples=80, deadline=None)
@given(_graphs())
def test_native_equals_reference_on_arbitrary_graphs(sample):
    graph, x, reduce = sample
    leaf = x.clone().requires_grad_()
    grad = torch.randn_like(x)
    results = []
    for backend in ("reference", "native"):
        with ops.use_backend(backend):
            out = ops.gspmm(graph, "copy_lhs", reduce, leaf)
            results.append((out, *torch.autograd.grad(out, leaf, grad)))
    for actual, expected, scale in zip(results[1], results[0], (x, x, grad)):
        _assert_close(actual, expected, graph, scale.abs().max() if scale.numel() else 0)


def test_without_a_compiler_numba_runs_and_says_why(tmp_path):
    # A clean cache and a compiler that always fails: one warning, then the numba backend.
    script = (
        "import warnings, torch\n"
        "from gnnforge import ops\n"
        "from gnnforge.graph import Graph\n"
        "from gnnforge.ops._dispatch import choose\n"
        "g = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    out = ops.copy_u_sum(g, torch.ones(2, 3))\n"
        "assert choose('gspmm', torch.device('cpu')).backend == 'auto'\n"
        "from gnnforge.ops import kernel_choices\n"
        "assert set(kernel_choices().values()) <= {'numba', 'mkl'}, kernel_choices()\n"
        "assert out.tolist() == [[1.0] * 3] * 2\n"
        "print(sum('unavailable, using other backends' in str(w.message) for w in caught))\n"
        "try:\n"
        "    ops.use_backend('native').__enter__()\n"
        "except RuntimeError as error:\n"
        "    print('refused', 'compiling the native kernels' in str(error))\n"
    )
    env = dict(os.environ, CXX="false", GNNFORGE_CACHE=str(tmp_path),
               PATH=str(_bin_with_failing_compilers(tmp_path)), NUMBA_NUM_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "refused", "True"]


def _bin_with_failing_compilers(tmp_path: Path) -> Path:
    """A PATH folder where every compiler name runs `false` (and nothing else is found)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("false", "g++", "c++", "clang++"):
        tool = folder / name
        tool.write_text("#!/bin/sh\nexit 1\n")
        tool.chmod(0o755)
    return folder


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_output_past_the_cache_takes_the_streaming_store_path(reduce):
    # [70_000, 256] float32 = 68 MiB >= 16 MiB: non-temporal stores (and, past 32 MiB,
    # the huge-page advice) are used; a scalar tail width (257) uses ordinary stores.
    for width in (256, 257):
        graph = _hub_graph(9, num_nodes=70_000 if width == 256 else 66_000, num_edges=3_000)
        x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(4))
        actual, expected = _both(lambda: ops.gspmm(graph, "copy_lhs", reduce, x))
        _assert_close(actual, expected, graph, x.abs().max())


@pytest.mark.parametrize("width", [16, 40, 256])
def test_multi_threaded_calls_equal_the_reference(width):
    # Enough work for the parallel paths (equal-work row chunks; the column-split
    # max/min gradient scatter) on two threads, whatever the machine's default.
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        graph = _hub_graph(11, num_nodes=3_000, num_edges=30_000)
        x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(5))
        leaf = x.requires_grad_()
        grad = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(6))
        for reduce in REDUCES:
            results = []
            for backend in ("reference", "native"):
                with ops.use_backend(backend):
                    out = ops.gspmm(graph, "copy_lhs", reduce, leaf)
                    results.append((out, *torch.autograd.grad(out, leaf, grad)))
            _assert_close(results[1][0], results[0][0], graph, x.detach().abs().max())
            _assert_close(results[1][1], results[0][1], graph, grad.abs().max())
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_recorded_winners_are_in_the_index_dtype(reduce, index_dtype, dtype):
    # The winners (arg) travel in the index dtype; -1 marks rows without in-edges, and
    # the gradient through them equals the reference for the serial column scatter
    # (F=256 float32 / F=128 float64: 1 KiB rows), the parallel one and the CSC pull.
    from gnnforge.ops._native import gspmm_native

    graph = _hub_graph(13)
    rowptr, col, eids = graph.csr(index_dtype)
    for width in (3, 64, 128, 256):
        x = torch.randn(graph.num_nodes, width, dtype=dtype,
                        generator=torch.Generator().manual_seed(width))
        out, arg, _ = gspmm_native(rowptr, col, eids, x, None, "copy_lhs", reduce, True)
        assert arg.dtype == index_dtype and arg.shape == (graph.num_nodes, width)
        isolated = rowptr[1:] == rowptr[:-1]
        assert bool((arg[isolated] == -1).all()) and bool((arg[~isolated] >= 0).all())
        picked = x.gather(0, arg[~isolated].long())
        torch.testing.assert_close(picked, out[~isolated])
        leaf = x.clone().requires_grad_()
        grad = torch.randn_like(x)
        actual_grad, expected_grad = _both(lambda leaf=leaf, grad=grad: torch.autograd.grad(
            ops.gspmm(graph, "copy_lhs", reduce, leaf), leaf, grad)[0], index_dtype)
        torch.testing.assert_close(actual_grad, expected_grad)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_int32_winners_through_the_torch_gradient_paths(index_dtype):
    # copy_e max (gradient scattered by torch from the winners) and a second derivative
    # of copy_u max (the torch gather/scatter backward) with int32 / int64 winners.
    graph = _hub_graph(17)
    edge = torch.randn(graph.num_edges, 9, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(1)).requires_grad_()
    grad = torch.randn(graph.num_nodes, 9, dtype=torch.float64)
    actual, expected = _both(lambda: torch.autograd.grad(
        ops.gspmm(graph, "copy_rhs", "max", None, edge), edge, grad)[0], index_dtype)
    torch.testing.assert_close(actual, expected)
    x = torch.randn(graph.num_nodes, 5, dtype=torch.float64, requires_grad=True)

    def second():
        out = ops.copy_u_max(graph, x)
        first, = torch.autograd.grad((out * out).sum(), x, create_graph=True)
        return torch.autograd.grad(first.sum(), x)[0]

    actual, expected = _both(second, index_dtype)
    torch.testing.assert_close(actual, expected)
    with ops.use_backend("native", index_dtype=index_dtype):
        assert torch.autograd.gradcheck(lambda e: ops.copy_e_max(graph, e),
                                        (edge.detach()[:, :2].clone().requires_grad_(),))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradients_past_the_streaming_threshold(reduce):
    # [17_000, 256] float32 = 16.6 MiB >= 16 MiB: the forward and the backward kernels
    # (plain and weighted CSC sums) both take the streaming-store path.
    graph = _hub_graph(19, num_nodes=17_000, num_edges=6_000)
    x = torch.randn(graph.num_nodes, 256, generator=torch.Generator().manual_seed(7))
    grad = torch.randn_like(x)
    leaf = x.requires_grad_()

    def call():
        out = ops.gspmm(graph, "copy_lhs", reduce, leaf)
        return (out, *torch.autograd.grad(out, leaf, grad))

    actual, expected = _both(call, torch.int32)
    _assert_close(actual[0], expected[0], graph, x.detach().abs().max())
    _assert_close(actual[1], expected[1], graph, grad.abs().max())


@pytest.mark.parametrize("op", ["copy_lhs", "copy_rhs"])
def test_float32_winners_past_32_bit_lanes_go_to_numba(monkeypatch, op):
    # float32 max/min keep winners in 32-bit lanes; with 2^31 or more source rows the
    # call must not truncate them. The limit is lowered so a small graph crosses it.
    import gnnforge.ops._cpu as cpu
    import gnnforge.ops._native as native
    from gnnforge.ops._cpu_kernels import fixed_spmm

    graph = _hub_graph(5)
    rowptr, col, eids = graph.csr(torch.int64)
    x = torch.randn(graph.num_nodes, 16)
    e = torch.randn(graph.num_edges, 16)
    expected = cpu.gspmm_cpu(rowptr, col, eids, x, e, op, "max", True)
    calls = []
    monkeypatch.setattr(native, "_FLOAT32_WINNER_LIMIT", 10)
    monkeypatch.setattr(cpu, "gspmm_cpu", lambda *args: calls.append(args) or expected)
    out, arg_lhs, arg_rhs = fixed_spmm("native")(rowptr, col, eids, x, e, op, "max", True)
    assert len(calls) == 1 and out is expected[0]
    monkeypatch.setattr(native, "_FLOAT32_WINNER_LIMIT", 2**31 - 1)
    direct = native.gspmm_native(rowptr, col, eids, x, e, op, "max", True)
    torch.testing.assert_close(direct[0], expected[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_partial_last_vector_has_the_bits_of_a_column_by_column_sum(dtype):
    """The tail vector overlaps the block's last columns and is stored over them: every
    build's copy sum must still have, bit for bit, numba's column-by-column sum in edge
    order, on rows walked in one block, in several, and in L1 tiles (hub rows), with a
    -0.0 from a single in-edge kept (a row of at least one vector is loaded as it is)."""
    from gnnforge.ops import _cpu_kernels

    graph = _hub_graph(7, num_nodes=300, num_edges=6000)
    rowptr, col, _ = graph.csr()
    for width in (9, 17, 31, 33, 47, 65, 100, 300):
        x = torch.randn(graph.num_nodes, width, dtype=dtype,
                        generator=torch.Generator().manual_seed(width))
        x[torch.rand(x.shape, generator=torch.Generator().manual_seed(1)) < 0.3] = -0.0
        want = _cpu_kernels.fixed_spmm("numba")(rowptr, col, col, x, None, "copy_lhs", "sum")[0]
        for variant in _cpu_kernels.native_variants():
            got = _cpu_kernels.fixed_spmm(f"native:{variant}")(rowptr, col, col, x, None,
                                                                "copy_lhs", "sum")[0]
            assert torch.equal(got, want), (width, variant)
            gathered = _cpu_kernels.fixed_gather(f"native:{variant}")(x, torch.arange(5))
            assert torch.equal(torch.signbit(gathered), torch.signbit(x[:5])), (width, variant)
