"""A fresh GNNFORGE_CACHE folder that starts with the suite's compiled kernels.

Tests point GNNFORGE_CACHE at a temporary folder to test dataset caching in isolation. An
empty folder also holds no native library and no kernel-selection record, so the first
kernel call there compiled every instruction-set variant (g++, about 10-20 s each) and
timed the candidates: a minute per test on a 2-core machine, for work these tests are not
about (tests/ops/test_native_build.py and test_autotune.py test building and selecting in
empty caches). `seeded_cache` copies the suite cache's native builds (with their hash
records, so they are verified as usual) and its selection record into the new folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["seeded_cache"]


def seeded_cache(folder: Path) -> Path:
    """`folder` with the current cache's `native/` builds and `tuning/` record copied in
    (built first where missing; skipped without a compiler); returns `folder`."""
    from gnnforge.data import cache_dir
    from gnnforge.ops._native_build import available_variants, build

    (folder / "native").mkdir(parents=True, exist_ok=True)
    for variant in available_variants():
        try:
            library = build(variant.name)
        except Exception:  # no compiler: the copy has none either, as the suite cache
            continue
        for path in (library, library.with_suffix(".json")):
            shutil.copyfile(path, folder / "native" / path.name)
    tuning = cache_dir() / "tuning"
    if tuning.is_dir():
        shutil.copytree(tuning, folder / "tuning", dirs_exist_ok=True)
    return folder
