"""The native library's cache: variants, integrity (hash, symbols), remembered failures, locks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnforge.ops import _native_build
from gnnforge.ops._native_build import available_variants, build, default_variant
from tests._timeouts import SUBPROCESS_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _cached_copy(tmp_path: Path, variant: str) -> Path:
    """The library of `variant` copied (with its hash record) into a fresh cache folder."""
    source = build(variant)
    target = tmp_path / source.name
    shutil.copyfile(source, target)
    shutil.copyfile(source.with_suffix(".json"), target.with_suffix(".json"))
    return target


def test_every_variant_builds_and_the_widest_is_the_default():
    names = [variant.name for variant in available_variants()]
    assert names[0] in ("sse2", "armv8", "native")
    assert default_variant() == names[-1]
    for name in names:
        assert build(name).exists()
    with pytest.raises(ValueError, match="cannot run on this CPU"):
        build("vax")


def test_an_intact_cached_library_is_reused(tmp_path):
    target = _cached_copy(tmp_path, available_variants()[0].name)
    stamp = target.stat().st_mtime_ns
    assert build(available_variants()[0].name, directory=tmp_path) == target
    assert target.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_a_truncated_library_is_rebuilt_with_a_warning_never_loaded(tmp_path):
    name = available_variants()[0].name
    target = _cached_copy(tmp_path, name)
    target.write_bytes(target.read_bytes()[:4096])
    with pytest.warns(RuntimeWarning, match="does not match the hash"):
        rebuilt = build(name, directory=tmp_path)
    assert rebuilt == target
    record = json.loads(target.with_suffix(".json").read_text())
    assert _native_build._sha256(target) == record["sha256"]
    assert target.stat().st_size > 4096


def test_a_planted_library_without_a_hash_record_never_runs(tmp_path):
    # A planted .so would run its constructor on dlopen: it must be replaced first.
    name = available_variants()[0].name
    target = _cached_copy(tmp_path, name)
    marker = tmp_path / "constructor-ran"
    planted = tmp_path / "planted.cpp"
    planted.write_text('#include <cstdio>\n__attribute__((constructor)) static void f() '
                       f'{{ std::fopen("{marker}", "w"); }}\n'
                       'extern "C" int gf_abi_version() { return -1; }\n')
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(target), str(planted)], check=True)
    with pytest.warns(RuntimeWarning, match="does not match the hash"):
        build(name, directory=tmp_path)
    assert not marker.exists()


def _failing_compiler(folder: Path) -> Path:
    """A compiler that logs each call to `calls` and fails (but answers --version)."""
    folder.mkdir()
    script = folder / "g++"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo fake 1.0; exit 0; fi\n'
                      f'echo call >> {folder / "calls"}\necho "fake error" >&2\nexit 1\n')
    script.chmod(0o755)
    return script


def test_a_failed_build_is_remembered_not_retried(tmp_path, monkeypatch):
    compiler = _failing_compiler(tmp_path / "bin")
    monkeypatch.setenv("CXX", str(compiler))
    name = available_variants()[0].name
    for _ in range(2):
        with pytest.raises(RuntimeError, match="fake error"):
            build(name, directory=tmp_path / "cache")
    calls = (tmp_path / "bin" / "calls").read_text().split()
    assert len(calls) == len(available_variants()[0].flags)  # once per flag set, not twice


@pytest.mark.slow
def test_a_library_missing_a_symbol_is_rebuilt_with_a_warning(tmp_path):
    # Forge a cached library with a valid hash record but only one symbol, in a fresh process.
    script = (
        "import json, subprocess, warnings\n"
        "from gnnforge.ops import _native_build as nb\n"
        "name = nb.available_variants()[0].name\n"
        "spec = nb._variant(name)\n"
        "key = nb._key(nb._compiler(), spec.flags[0])\n"
        "from gnnforge.data import cache_dir\n"
        "d = cache_dir() / 'native'; d.mkdir(parents=True, exist_ok=True)\n"
        "target = d / f'gnnforge_native-{name}-{key}.so'\n"
        f"subprocess.run(['g++', '-shared', '-fPIC', '-o', str(target), {str(tmp_path / 'one.cpp')!r}], check=True)\n"
        "target.with_suffix('.json').write_text(json.dumps({'sha256': nb._sha256(target)}))\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    library = nb.load(name)\n"
        "print(library is not None, any('lacks gf_spmm_copy' in str(w.message) for w in caught))\n"
    )
    (tmp_path / "one.cpp").write_text('extern "C" int gf_abi_version() { return 4; }\n')
    env = dict(os.environ, GNNFORGE_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_variants_compute_the_same_copy_sum():
    from gnnforge.ops._native import gspmm_native

    generator = torch.Generator().manual_seed(0)
    rowptr = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    col = torch.tensor([0, 2, 1, 1, 0], dtype=torch.int32)
    x = torch.randn(3, 37, generator=generator)
    results = [gspmm_native(rowptr, col, col, x, None, "copy_lhs", "sum", False, variant=v.name)[0]
               for v in available_variants()]
    expected = torch.stack([x[0] + x[2], torch.zeros(37), x[1] + x[1] + x[0]])
    for result in results:
        torch.testing.assert_close(result, expected)


def test_the_sources_digest_covers_sources_and_headers(tmp_path, monkeypatch):
    monkeypatch.setattr(_native_build, "_SOURCE_DIR", tmp_path)
    (tmp_path / "spmm.cpp").write_text("int f();\n")
    (tmp_path / "simd.h").write_text("#define W 8\n")
    before = _native_build.sources_digest()
    assert len(before) == 16 and before == _native_build.sources_digest()
    (tmp_path / "simd.h").write_text("#define W 16\n")  # a header-only kernel edit
    after_header = _native_build.sources_digest()
    assert after_header != before
    (tmp_path / "spmm.cpp").write_text("int g();\n")
    assert _native_build.sources_digest() != after_header
