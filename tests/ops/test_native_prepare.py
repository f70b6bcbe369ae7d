"""Compiling the native kernels before training: what it builds, and when it says so."""

from __future__ import annotations

import pytest

from gnnforge.ops import _native_build, _native_prepare
from gnnforge.ops._cpu_kernels import allowed_native_variants, native_variants

needs_compiler = pytest.mark.skipif(_native_build._compiler() is None,
                                    reason="no C++ compiler: nothing is ever compiled")


@needs_compiler
def test_nothing_to_say_once_every_variant_is_cached():
    native_variants()  # builds what the suite cache lacks
    assert all(_native_build.is_cached(name) for name in native_variants())
    assert _native_prepare.prepare_native_kernels() is None


@needs_compiler
def test_an_empty_cache_is_not_cached(tmp_path):
    assert not any(_native_build.is_cached(name, tmp_path)
                   for name in allowed_native_variants())


def test_the_line_names_what_was_compiled_and_what_failed(monkeypatch):
    names = ["sse2", "avx2", "avx512"]
    monkeypatch.setattr(_native_prepare, "allowed_native_variants", lambda: names)
    monkeypatch.setattr(_native_build, "_compiler", lambda: "/usr/bin/g++")
    monkeypatch.setattr(_native_build, "is_cached", lambda name: name == "sse2")
    monkeypatch.setattr(_native_prepare, "native_variants", lambda: ["sse2", "avx2"])
    line = _native_prepare.prepare_native_kernels()
    assert line.startswith("native kernels: compiled avx2 for this CPU in ")
    assert line.endswith("; avx512 failed: other backends stand in")


def test_a_variant_that_failed_before_is_not_announced_again(monkeypatch):
    monkeypatch.setattr(_native_prepare, "allowed_native_variants", lambda: ["sse2", "avx512"])
    monkeypatch.setattr(_native_build, "_compiler", lambda: "/usr/bin/g++")
    monkeypatch.setattr(_native_build, "is_cached", lambda name: name == "sse2")
    monkeypatch.setattr(_native_prepare, "native_variants", lambda: ["sse2"])
    assert _native_prepare.prepare_native_kernels() is None


def test_disabled_native_kernels_compile_nothing(monkeypatch):
    monkeypatch.setenv("GNNFORGE_NATIVE", "0")
    monkeypatch.setattr(_native_prepare, "native_variants",
                        lambda: pytest.fail("GNNFORGE_NATIVE=0 must build nothing"))
    assert _native_prepare.prepare_native_kernels() is None


def test_train_prints_the_line_before_training(tmp_path, monkeypatch, capsys):
    from gnnforge.cli import main

    monkeypatch.setattr(_native_prepare, "prepare_native_kernels",
                        lambda: "native kernels: compiled avx2 for this CPU in 31 s")
    assert main(["train", "--task", "node", "--dataset", "sbm", "--max-steps", "1",
                 "--hidden", "8", "--no-progress", "--out-dir", str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    built = lines.index("native kernels: compiled avx2 for this CPU in 31 s")
    assert built < next(i for i, line in enumerate(lines) if line.startswith("epoch"))
