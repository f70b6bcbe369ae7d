"""The copy sum/mean with the deep prefetch (`_native.gspmm_deep`, the form
'native:VARIANT/deep'): the bits of the one-pass kernel on every graph, width, dtype and
thread count, and the form's name running it where it covers the call and the base
elsewhere (its place among the trials: test_source_blocks.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.ops import _cpu_kernels, _native
from gnnforge.ops._native_build import available_variants

pytestmark = pytest.mark.skipif(not _native.available(), reason="no native kernels here")

VARIANTS = [variant.name for variant in available_variants() if _native.available(variant.name)]
# Narrow (scalar rows), whole vectors (exact rows), tails, one block and tiled rows.
WIDTHS = [1, 3, 7, 8, 16, 20, 47, 64, 100, 256, 300, 1100]


def _csr(nodes: int, edges: int, generator: torch.Generator,
         index_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(rowptr, col) of `edges` random edges grouped by destination, in drawn order."""
    src = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    dst = torch.randint(0, max(nodes, 1), (edges,), generator=generator)
    rowptr = torch.zeros(nodes + 1, dtype=torch.int64)
    rowptr[1:] = torch.bincount(dst, minlength=nodes).cumsum(0)
    return rowptr.to(index_dtype), src[torch.argsort(dst, stable=True)].to(index_dtype)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int64 if tensor.dtype == torch.float64 else torch.int32)


def _one_pass(rowptr, col, x, reduce, variant=None) -> torch.Tensor:
    return _native.gspmm_native(rowptr, col, col, x, None, "copy_lhs", reduce, False,
                                variant)[0].clone()


@settings(max_examples=150, deadline=None)
@given(nodes=st.integers(0, 70), edges=st.integers(0, 600), width=st.sampled_from(WIDTHS),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       index_dtype=st.sampled_from([torch.int32, torch.int64]),
       reduce=st.sampled_from(["sum", "mean"]), signed_zeros=st.booleans(),
       seed=st.integers(0, 2**16), variant=st.sampled_from(VARIANTS or [None]))
def test_the_deep_prefetch_gives_the_bits_of_one_pass(nodes, edges, width, dtype,
                                                      index_dtype, reduce, signed_zeros,
                                                      seed, variant):
    generator = torch.Generator().manual_seed(seed)
    rowptr, col = _csr(nodes, edges if nodes else 0, generator, index_dtype)
    x = torch.randn(nodes, width, generator=generator, dtype=dtype)
    if signed_zeros:  # -0.0 alone in a row stays -0.0 in one pass: so must it here
        x[torch.rand(nodes, width, generator=generator) < 0.5] = -0.0
    deep = _native.gspmm_deep(rowptr, col, x, reduce, variant)
    assert deep.shape == (nodes, width) and deep.dtype == dtype
    assert torch.equal(_bits(deep), _bits(_one_pass(rowptr, col, x, reduce, variant)))
    dst = torch.repeat_interleave(torch.arange(nodes), rowptr.diff().long())
    reference = torch.zeros(nodes, width, dtype=torch.float64)
    reference.index_add_(0, dst, x.double()[col.long()])
    if reduce == "mean":
        reference /= rowptr.diff().clamp(min=1).double().unsqueeze(1)
    torch.testing.assert_close(deep.double(), reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_call_on_threads_has_the_bits_of_one_pass(threads, variant):
    """Above the kernels' threading threshold, rows of hundreds of edges (the prefetch
    runs across rows and past a thread's chunk end never) and power-law sources."""
    generator = torch.Generator().manual_seed(3)
    nodes, edges = 4096, 200_000
    src = (torch.rand(edges, generator=generator).pow(3) * nodes).long()
    dst = torch.randint(0, nodes, (edges,), generator=generator)
    rowptr = torch.zeros(nodes + 1, dtype=torch.int64)
    rowptr[1:] = torch.bincount(dst, minlength=nodes).cumsum(0)
    rowptr, col = rowptr.int(), src[torch.argsort(dst, stable=True)].int()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for width in (47, 64, 100):
            x = torch.randn(nodes, width, generator=generator)
            for reduce in ("sum", "mean"):
                deep = _native.gspmm_deep(rowptr, col, x, reduce, variant)
                assert torch.equal(_bits(deep), _bits(_one_pass(rowptr, col, x, reduce,
                                                                variant)))
    finally:
        torch.set_num_threads(previous)


def test_half_precision_rows_are_summed_in_float32_like_one_pass():
    generator = torch.Generator().manual_seed(5)
    rowptr, col = _csr(50, 400, generator, torch.int64)
    x = torch.randn(50, 24, generator=generator).to(torch.bfloat16)
    deep = _native.gspmm_deep(rowptr, col, x, "mean")
    expected = _native.gspmm_native(rowptr, col, col, x, None, "copy_lhs", "mean", False)[0]
    assert deep.dtype == torch.bfloat16 and torch.equal(deep, expected)


def test_the_form_name_runs_the_deep_kernel_and_other_calls_run_the_base(monkeypatch):
    widest = f"native:{_cpu_kernels.native_variants()[-1]}"
    generator = torch.Generator().manual_seed(9)
    rowptr, col = _csr(300, 3000, generator, torch.int32)
    x = torch.randn(300, 20, generator=generator)
    form, base = _cpu_kernels.fixed_spmm(f"{widest}/deep"), _cpu_kernels.fixed_spmm(widest)
    calls = []
    deep = _native.gspmm_deep
    monkeypatch.setattr(_native, "gspmm_deep", lambda *a: calls.append(a[3]) or deep(*a))
    for op, reduce in (("copy_lhs", "sum"), ("copy_lhs", "mean"), ("copy_lhs", "max"),
                       ("copy_rhs", "sum")):
        lhs, rhs = (x, None) if op == "copy_lhs" else (None, x[:1].expand(3000, 20) + 0)
        got = form(rowptr, col, col.long(), lhs, rhs, op, reduce)
        want = base(rowptr, col, col.long(), lhs, rhs, op, reduce)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), (op, reduce)
    assert calls == ["sum", "mean"]
