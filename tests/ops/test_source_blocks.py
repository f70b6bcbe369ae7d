"""The source-blocked copy sum/mean (`_native.gspmm_source_blocked`): one pass per range of
source rows, with the bits of the one-pass kernel on every graph, and its place among the
candidates and the trials (`_cpu_kernels`, `_trials`)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.ops import _auto_kernels, _cpu_kernels, _kernel_class, _native, _trials
from gnnforge.ops._kernel_class import FITS, STREAMS, KernelClass
from gnnforge.ops._native_build import available_variants

pytestmark = pytest.mark.skipif(not _native.available(), reason="no native kernels here")

# Every instruction-set build: the blocked sum runs 64-byte vectors under AVX-512 only.
VARIANTS = [variant.name for variant in available_variants() if _native.available(variant.name)]

WIDTHS = [1, 3, 7, 8, 16, 20, 33, 64, 100, 256, 300]


def _csr(nodes: int, src: torch.Tensor, dst: torch.Tensor, index_dtype: torch.dtype,
         sorted_rows: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(rowptr, col) grouped by destination; within a row by source when `sorted_rows`,
    else in the edges' given order."""
    order = (torch.argsort(dst * max(nodes, 1) + src) if sorted_rows
             else torch.argsort(dst, stable=True))
    rowptr = torch.zeros(nodes + 1, dtype=torch.int64)
    rowptr[1:] = torch.bincount(dst, minlength=nodes).cumsum(0)
    return rowptr.to(index_dtype), src[order].to(index_dtype)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int64 if tensor.dtype == torch.float64 else torch.int32)


def _one_pass(rowptr, col, x, reduce, variant=None) -> torch.Tensor:
    return _native.gspmm_native(rowptr, col, col, x, None, "copy_lhs", reduce, False,
                                variant)[0].clone()


def _reference(rowptr, col, x, reduce) -> torch.Tensor:
    dst = torch.repeat_interleave(torch.arange(rowptr.shape[0] - 1), rowptr.diff().long())
    out = torch.zeros(rowptr.shape[0] - 1, x.shape[1], dtype=torch.float64)
    out.index_add_(0, dst, x.double()[col.long()])
    if reduce == "mean":
        out /= rowptr.diff().clamp(min=1).double().unsqueeze(1)
    return out


@settings(max_examples=150, deadline=None)
@given(nodes=st.integers(0, 70), edges=st.integers(0, 500), width=st.sampled_from(WIDTHS),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       index_dtype=st.sampled_from([torch.int32, torch.int64]), sorted_rows=st.booleans(),
       reduce=st.sampled_from(["sum", "mean"]), block_rows=st.integers(1, 80),
       signed_zeros=st.booleans(), seed=st.integers(0, 2**16),
       variant=st.sampled_from(VARIANTS or [None]))
def test_every_block_size_gives_the_bits_of_one_pass(nodes, edges, width, dtype, index_dtype,
                                                     sorted_rows, reduce, block_rows,
                                                     signed_zeros, seed, variant):
    generator = torch.Generator().manual_seed(seed)
    edges = edges if nodes else 0
    src = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    dst = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    rowptr, col = _csr(nodes, src, dst, index_dtype, sorted_rows)
    x = torch.randn(nodes, width, generator=generator, dtype=dtype)
    if signed_zeros:  # -0.0 alone in a row stays -0.0 in one pass: so must it here
        x[torch.rand(nodes, width, generator=generator) < 0.5] = -0.0
    block_bytes = block_rows * width * x.element_size()
    blocked = _native.gspmm_source_blocked(rowptr, col, x, reduce, block_bytes, variant)
    assert torch.equal(_bits(blocked), _bits(_one_pass(rowptr, col, x, reduce, variant)))
    torch.testing.assert_close(blocked.double(), _reference(rowptr, col, x, reduce),
                               rtol=1e-5, atol=1e-5)
    # The mean's gradient: the weighted sum over the CSC (here the CSR stands in for it,
    # `x` for the upstream gradient, and rowptr for the forward's degrees).
    one_pass = _native.mean_grad_native(rowptr, col, rowptr, x, nodes, variant).clone()
    blocked = _native.mean_grad_native(rowptr, col, rowptr, x, nodes, variant, block_bytes)
    assert torch.equal(_bits(blocked), _bits(one_pass))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_call_in_many_passes_on_threads_has_the_bits_of_one_pass(threads, variant):
    """Above the kernels' threading threshold, with 1 and 2 threads, rows of hundreds of
    edges spread over 16 ranges, and power-law sources (a few very frequent)."""
    generator = torch.Generator().manual_seed(3)
    nodes, edges = 4096, 200_000
    src = (torch.rand(edges, generator=generator).pow(3) * nodes).long()
    dst = torch.randint(0, nodes, (edges,), generator=generator)
    rowptr, col = _csr(nodes, src, dst, torch.int32, sorted_rows=True)
    x = torch.randn(nodes, 64, generator=generator)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for reduce in ("sum", "mean"):
            blocked = _native.gspmm_source_blocked(rowptr, col, x, reduce, 256 * 64 * 4,
                                                   variant)
            assert torch.equal(_bits(blocked), _bits(_one_pass(rowptr, col, x, reduce, variant)))
    finally:
        torch.set_num_threads(previous)


def test_half_precision_rows_are_summed_in_float32_like_one_pass():
    generator = torch.Generator().manual_seed(5)
    src, dst = torch.randint(0, 50, (400,), generator=generator), torch.randint(0, 50, (400,))
    rowptr, col = _csr(50, src, dst, torch.int64, sorted_rows=True)
    x = torch.randn(50, 24, generator=generator).to(torch.bfloat16)
    blocked = _native.gspmm_source_blocked(rowptr, col, x, "mean", 7 * 24 * 4)
    expected = _native.gspmm_native(rowptr, col, col, x, None, "copy_lhs", "mean", False)[0]
    assert blocked.dtype == torch.bfloat16 and torch.equal(blocked, expected)


def test_rows_without_in_edges_are_zero_whatever_the_buffer_held():
    rowptr = torch.tensor([0, 0, 2, 2, 3], dtype=torch.int32)
    col = torch.tensor([0, 3, 1], dtype=torch.int32)
    x = torch.arange(8.0).reshape(4, 2)
    for _ in range(2):   # the second call reuses the first one's pooled output
        out = _native.gspmm_source_blocked(rowptr, col, x, "sum", 8)  # one row a range
        assert torch.equal(out, torch.tensor([[0.0, 0], [6, 8], [0, 0], [2, 3]]))
        out.fill_(7.0)


# ------------------------------------------------------------------ names and candidates

def _widest() -> str:
    return f"native:{_cpu_kernels.native_variants()[-1]}"


def test_a_form_name_runs_the_blocked_kernel_and_other_reduces_run_the_base():
    generator = torch.Generator().manual_seed(9)
    src, dst = torch.randint(0, 300, (3000,), generator=generator), torch.randint(0, 300, (3000,))
    rowptr, col = _csr(300, src, dst, torch.int32, sorted_rows=True)
    x = torch.randn(300, 16, generator=generator)
    form = _cpu_kernels.fixed_spmm(f"{_widest()}/src1MiB")
    base = _cpu_kernels.fixed_spmm(_widest())
    for reduce in ("sum", "mean", "max"):
        got = form(rowptr, col, col, x, None, "copy_lhs", reduce)
        want = base(rowptr, col, col, x, None, "copy_lhs", reduce)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), reduce
    got = _cpu_kernels.fixed_mean_grad(f"{_widest()}/src1MiB")(rowptr, col, rowptr, x, 300)
    assert torch.equal(got, _cpu_kernels.fixed_mean_grad(_widest())(rowptr, col, rowptr, x, 300))


@pytest.mark.parametrize("name", ["native:avx2/src", "native:avx2/src12", "native:avx2/srcxMiB",
                                  "numba/src4MiB"])
def test_a_malformed_form_name_is_refused_with_the_name(name):
    with pytest.raises(ValueError, match="unknown kernel name"):
        _cpu_kernels.fixed_spmm(name)


def test_copy_sum_mean_and_mean_grad_classes_have_forms_and_others_do_not(monkeypatch):
    monkeypatch.setattr(_cpu_kernels, "last_level_cache_bytes", lambda: 256 * 2**20)
    forms = [f"{_widest()}/src32MiB", f"{_widest()}/src64MiB"]
    assert _cpu_kernels.source_block_forms(_widest()) == forms
    covered = [KernelClass("copy_lhs", reduce, "float32", "int32", 2, size)
               for reduce in ("sum", "mean") for size in (FITS, STREAMS)]
    covered.append(KernelClass("mean_grad", "-", "float64", "int64", 3, STREAMS))
    for kernel_class in covered:
        # the copy sum/mean also has the deep prefetch (test_deep_prefetch.py)
        deep = [f"{_widest()}/deep"] if kernel_class.primitive == "copy_lhs" else []
        assert _cpu_kernels.forms(kernel_class, _widest()) == forms + deep
        # a form brings its base and its siblings; another build brings its own forms
        assert _cpu_kernels.forms(kernel_class, forms[1]) == [_widest(), forms[0], *deep]
        sse2_deep = ["native:sse2/deep"] if deep else []
        assert _cpu_kernels.forms(kernel_class, "native:sse2") == [
            "native:sse2/src32MiB", "native:sse2/src64MiB", *sse2_deep]
        if deep:
            assert _cpu_kernels.forms(kernel_class, deep[0]) == [_widest(), *forms]
        for other in ("numba", "mkl"):
            assert _cpu_kernels.forms(kernel_class, other) == []
    for kernel_class in (KernelClass("copy_lhs", "max", "float32", "int32", 2, STREAMS),
                         KernelClass("copy_rhs", "sum", "float32", "int32", 2, STREAMS),
                         KernelClass("extreme_grad", "-", "float32", "int32", 2, STREAMS),
                         KernelClass("mul", "sum", "float32", "int32", 2, STREAMS)):
        assert _cpu_kernels.forms(kernel_class, _widest()) == []


def test_the_calibration_does_not_time_the_forms():
    """A form ties its base on the calibration graph (two in-edges a row): as a candidate
    it could become the recorded choice by chance, and flip the planner's fingerprint."""
    for kernel_class in (KernelClass("copy_lhs", "sum", "float32", "int32", 2, STREAMS),
                         KernelClass("mean_grad", "-", "float32", "int32", 2, FITS)):
        names = _cpu_kernels.candidates(kernel_class)
        assert _widest() in names and not any("/" in name for name in names)


def test_a_small_cache_still_gets_one_mib_ranges(monkeypatch):
    monkeypatch.setattr(_cpu_kernels, "last_level_cache_bytes", lambda: 2**20)
    assert _cpu_kernels.source_block_forms("native:sse2") == ["native:sse2/src1MiB"]


# ------------------------------------------------------------------------ in the trials

@pytest.fixture
def small_cache_trials(tmp_path, monkeypatch):
    """A fresh tuning record, a 1 MiB last-level cache (a 2 MiB x streams), every
    calibrated candidate a contender, and only the widest native build as a candidate (it
    and its forms have the same bits, so which one the timings pick cannot change a
    result)."""
    from gnnforge.ops import _native_build

    for variant in _native_build.available_variants():
        _native_build.load(variant.name)
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv("GNNFORGE_KERNEL_TRIALS", raising=False)
    monkeypatch.setattr(_kernel_class, "last_level_cache_bytes", lambda: 2**20)
    monkeypatch.setattr(_cpu_kernels, "last_level_cache_bytes", lambda: 2**20)
    monkeypatch.setattr(_trials, "_CONTENDER_RATIO", float("inf"))
    every = _cpu_kernels.candidates
    monkeypatch.setattr(_cpu_kernels, "candidates", lambda kernel_class: [
        name for name in every(kernel_class) if name.startswith(_widest())])
    _kernel_class.classify.cache_clear()
    _auto_kernels.forget()
    yield
    _kernel_class.classify.cache_clear()
    _auto_kernels.forget()


def test_copy_sum_on_a_graph_larger_than_the_cache_times_the_forms_and_keeps_its_bits(
        small_cache_trials):
    import gnnforge.ops as ops
    from gnnforge.graph import Graph

    generator = torch.Generator().manual_seed(11)
    nodes = 8192                                   # 8192 x 64 float32: 2 MiB, two ranges
    graph = Graph(torch.randint(0, nodes, (60_000,), generator=generator),
                  torch.randint(0, nodes, (60_000,), generator=generator), nodes)
    x = torch.randn(nodes, 64, generator=generator)

    def compute() -> list[torch.Tensor]:
        leaf = x.clone().requires_grad_(True)
        total, mean = ops.copy_u_sum(graph, leaf), ops.copy_u_mean(graph, leaf)
        grad, = torch.autograd.grad((total * mean).sum(), leaf)
        return [total.detach().clone(), mean.detach().clone(), grad]

    with ops.use_backend("auto", index_dtype=torch.int32):
        first = compute()                                 # the trials run here
        again = compute()
    timed = {(result["class"].split(".")[0], name) for result in _trials.trial_results()
             for name in result["ms"]}
    for primitive in ("copy_lhs", "mean_grad"):
        assert (primitive, f"{_widest()}/src1MiB") in timed, timed
    assert ("copy_lhs", f"{_widest()}/deep") in timed, timed
    with ops.use_backend(_widest(), index_dtype=torch.int32):
        one_pass = compute()
    for results in (first, again):
        assert all(torch.equal(a, b) for a, b in zip(results, one_pass))
    # Through the custom op (what torch.compile traces), whose returns may not alias.
    from gnnforge.ops._custom_ops import spmm_op
    from gnnforge.ops._graph_arrays import graph_arrays

    arrays = graph_arrays(graph, None, csc=True, coo=True)
    traced = spmm_op(arrays, x, None, "copy_lhs", "sum", "auto", True)[0]
    assert torch.equal(traced, one_pass[0])
