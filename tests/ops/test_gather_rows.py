"""gather_rows equals index_select on every candidate and the auto path (values; the
native kernels' rows narrower than one vector are summed from +0.0, so a -0.0 there
comes back as +0.0)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.ops import _cpu_kernels, _gather_rows, _trials, _tuning_record, gather_rows
from gnnforge.ops._kernel_class import KernelClass, classify


def _inputs(rows, width, count, dtype, index_dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=generator, dtype=dtype)
    if rows:
        x[0, 0] = -0.0
        x[-1, -1] = float("inf")
    index = torch.randint(0, max(rows, 1), (count,), generator=generator).to(index_dtype)
    return x, index if rows else index[:0]


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 300), width=st.integers(1, 70), count=st.integers(0, 2000),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       index_dtype=st.sampled_from([torch.int32, torch.int64]), seed=st.integers(0, 2**16))
def test_every_candidate_copies_the_rows_exactly(rows, width, count, dtype, index_dtype, seed):
    x, index = _inputs(rows, width, count, dtype, index_dtype, seed)
    expected = x.index_select(0, index)
    kernel_class = KernelClass(_cpu_kernels.GATHER, "-", "float32", "int32", 2)
    for name in _cpu_kernels.candidates(kernel_class):
        out = _cpu_kernels.fixed_gather(name)(x, index)
        assert out.shape == expected.shape and out.dtype == dtype
        assert torch.equal(out, expected), name


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_auto_path_on_a_large_gather(index_dtype):
    x, index = _inputs(5000, 100, 3000, torch.float32, index_dtype, seed=1)
    out = gather_rows(x, index)
    assert torch.equal(out, x.index_select(0, index))
    assert "torch" in _cpu_kernels.candidates(KernelClass(_cpu_kernels.GATHER, "-", "float32",
                                                          "int32", 2))


def test_fallbacks_keep_index_selects_behaviour():
    x = torch.randn(50, 4, requires_grad=True)
    index = torch.tensor([3, 3, 49])
    out = gather_rows(x, index)                       # autograd: index_select's
    out.sum().backward()
    assert x.grad[3].tolist() == [2.0] * 4 and x.grad[49].tolist() == [1.0] * 4
    strided = torch.randn(4, 50).t()                  # not contiguous
    assert torch.equal(gather_rows(strided, index), strided[index])
    assert gather_rows(torch.randn(0, 3), torch.zeros(0, dtype=torch.int64)).shape == (0, 3)


def test_out_of_range_indices_are_named():
    x = torch.randn(2000, 64)
    index = torch.zeros(2000, dtype=torch.int64)
    index[1234] = 2000
    with pytest.raises(IndexError, match=r"index\[1234\] = 2000 is outside \[0, 2000\)"):
        gather_rows(x, index)
    index[1234] = -1
    with pytest.raises(IndexError, match=r"index\[1234\] = -1"):
        gather_rows(x, index)


def test_the_first_large_gather_races_on_a_sample_of_its_rows(monkeypatch):
    """A class calibrated for the native copy, where the real rows favour index_select (a
    fake clock), even when the calibration put index_select 10x behind: the trial races
    every candidate, gathers only the index's first TRIAL_ROWS, the whole gather runs
    the winner, and later gathers from the same matrix run it without a trial."""
    x, index = _inputs(3000, 100, 5000, torch.float32, torch.int64, seed=2)
    if not _gather_rows._native_path(x, index):
        pytest.skip("no native build here: every gather is index_select")
    monkeypatch.setattr(_gather_rows, "TRIAL_ROWS", 1024)
    kernel_class = classify(_cpu_kernels.GATHER, "-", x.dtype, index.dtype, 100,
                            index.shape[0] * 100 * 4)
    native = _cpu_kernels.candidates(kernel_class)[0]
    monkeypatch.delenv("GNNFORGE_KERNEL_TRIALS", raising=False)
    monkeypatch.setattr(_tuning_record, "recorded", lambda cls: native)
    monkeypatch.setattr(_tuning_record, "measured_classes", lambda: {kernel_class.key(): {
        # index_select past every contender ratio: a gather races it all the same
        "choice": native, "min_ms": {native: 60.0, "torch": 600.0}}})
    now, rows = [0.0], []
    monkeypatch.setattr(_trials, "_clock", lambda: now[0])
    real = _cpu_kernels.fixed_gather

    def timed(name):
        def gather(x, index):
            rows.append((name, index.shape[0]))
            now[0] += 1.0 if name == "torch" else 3.0
            return real(name)(x, index)
        return gather
    monkeypatch.setattr(_cpu_kernels, "fixed_gather", timed)
    _trials.forget()
    try:
        assert torch.equal(gather_rows(x, index), x.index_select(0, index))
        assert rows[-1] == ("torch", 5000)                 # the whole gather: the winner
        assert {count for _, count in rows[:-1]} == {1024}  # the trial: a sample only
        assert {name for name, _ in rows[:-1]} == set(_cpu_kernels.candidates(kernel_class))
        rows.clear()
        assert torch.equal(gather_rows(x, index[:4000]), x.index_select(0, index[:4000]))
        assert rows == [("torch", 4000)]
    finally:
        _trials.forget()
