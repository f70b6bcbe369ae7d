"""A kernel-choice record path that cannot be used (a directory where the file should be,
no permission to write, a cache folder that cannot be made) warns once and leaves the
choices in memory: kernels still run and give the reference's result."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

import gnnforge.ops as ops
from gnnforge.data import rmat
from gnnforge.ops import _auto_kernels, _calibration, _cpu_kernels, _tuning_record
from gnnforge.ops._kernel_class import KernelClass
from tests._cache import seeded_cache

SUM64 = KernelClass("copy_lhs", "sum", "float32", "int32", 2)
MEAN64 = KernelClass("copy_lhs", "mean", "float32", "int32", 2)


def _fake_candidates(monkeypatch) -> None:
    def runner(name, kernel_class, kernels):
        return lambda: None
    monkeypatch.setattr("gnnforge.ops._calibration_inputs.runner", runner)
    monkeypatch.setattr(_cpu_kernels, "candidates", lambda kernel_class: ["numba", "mkl"])


def _record_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "kernel-choice record" in str(w.message)]


def test_a_directory_at_the_record_path_warns_once_and_keeps_choices_in_memory(
        fresh_cache, monkeypatch):
    _fake_candidates(monkeypatch)
    path = _tuning_record.record_path()
    path.mkdir(parents=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = _calibration.choice(SUM64, _cpu_kernels)
        second = _calibration.choice(MEAN64, _cpu_kernels)
    assert first in ("numba", "mkl") and second in ("numba", "mkl")
    messages = _record_warnings(caught)
    assert len(messages) == 1 and str(path) in messages[0] and "IsADirectoryError" in messages[0]
    assert _tuning_record.kernel_choices() == {SUM64.key(): first, MEAN64.key(): second}
    assert path.is_dir() and not list(path.iterdir())


def test_a_record_that_cannot_be_written_warns_once(fresh_cache, monkeypatch):
    """Root ignores permission bits, so the refused write is os.replace raising."""
    _fake_candidates(monkeypatch)

    def refuse(source, target):
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(os, "replace", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _calibration.choice(SUM64, _cpu_kernels)
        _calibration.choice(MEAN64, _cpu_kernels)
    messages = _record_warnings(caught)
    assert len(messages) == 1 and "PermissionError" in messages[0]
    assert set(_tuning_record.kernel_choices()) == {SUM64.key(), MEAN64.key()}
    assert not list(_tuning_record.record_path().parent.glob("*.tmp*"))


def test_a_cache_folder_that_cannot_be_made_warns_once(tmp_path, monkeypatch):
    _fake_candidates(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GNNFORGE_CACHE", str(blocker / "cache"))
    _auto_kernels.forget()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _calibration.choice(SUM64, _cpu_kernels)
            _calibration.choice(MEAN64, _cpu_kernels)
        assert len(_record_warnings(caught)) == 1
    finally:
        _auto_kernels.forget()


def test_a_kernel_call_runs_with_an_unusable_record(tmp_path, monkeypatch):
    seeded_cache(tmp_path)  # the suite's compiled kernels, not its record
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    _auto_kernels.forget()
    try:
        path = _tuning_record.record_path()
        path.unlink(missing_ok=True)
        path.mkdir(parents=True)
        graph = rmat(scale=8, num_edges=3000, seed=1)
        x = torch.randn(graph.num_nodes, 64)
        with pytest.warns(RuntimeWarning, match="cannot use the kernel-choice record"):
            out = ops.copy_u_sum(graph, x)
        with ops.use_backend("reference"):
            expected = ops.copy_u_sum(graph, x)
        torch.testing.assert_close(out, expected)
    finally:
        _auto_kernels.forget()
