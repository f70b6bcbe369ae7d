"""Warming the page cache: the sequential read, when it happens, and the memory it sees."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest

from gnnforge.data import load_synthetic_products
from gnnforge.data._page_cache import (_cgroup_headrooms, available_memory_bytes,
                                       warm_page_cache)

SMALL = 4096
MiB = 2**20


def _file(folder: Path, name: str, size: int) -> Path:
    path = folder / name
    path.write_bytes(os.urandom(size))
    return path


def _resident_pages(path: Path) -> tuple[int, int]:
    """(pages of the file in the page cache, pages of the file), by mincore over a map."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY)
        try:
            anchor = ctypes.c_char.from_buffer(mapped)
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.addressof(anchor), size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            del anchor
        finally:
            mapped.close()
    return sum(byte & 1 for byte in vector), pages


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_the_read_puts_every_page_in_the_cache(tmp_path):
    paths = [_file(tmp_path, "a.npy", 3 * MiB + 123), _file(tmp_path, "b.npy", 5 * MiB)]
    for path in paths:
        _evict(path)
    resident, pages = _resident_pages(paths[1])
    if resident == pages:
        pytest.skip(f"{tmp_path}'s file system keeps the pages in memory (tmpfs?)")
    warmup = warm_page_cache(paths, prefetch=True, progress=False)
    assert warmup.skipped is None and warmup.bytes_read == 8 * MiB + 123
    for path in paths:
        resident, pages = _resident_pages(path)
        assert resident == pages, path


def test_auto_reads_what_fits_in_half_the_available_memory(tmp_path):
    paths = [_file(tmp_path, "x.npy", MiB)]
    read = warm_page_cache(paths, available=2 * MiB, progress=False)
    assert read.skipped is None and read.bytes_read == MiB
    assert "1 MiB prefetched into the page cache" in read.describe()
    skipped = warm_page_cache(paths, available=2 * MiB - 1, progress=False)
    assert skipped.bytes_read == 0
    assert skipped.skipped == "1 MiB of files, more than 50% of 2 MiB available"
    assert skipped.describe().startswith("page cache not prefetched (1 MiB of files")


def test_forced_either_way_whatever_the_memory(tmp_path):
    paths = [_file(tmp_path, "x.npy", MiB)]
    assert warm_page_cache(paths, prefetch=True, available=0, progress=False).bytes_read == MiB
    never = warm_page_cache(paths, prefetch=False, progress=False)
    assert (never.bytes_read, never.skipped) == (0, "prefetch=False")


def test_a_bad_prefetch_value_is_named(tmp_path):
    with pytest.raises(TypeError, match="prefetch must be True, False or None, got 'yes'"):
        warm_page_cache([_file(tmp_path, "x.npy", 10)], prefetch="yes")


def _group(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")


def test_cgroup_v1_limits_of_the_group_and_its_ancestors(tmp_path):
    memory = tmp_path / "memory"
    _group(memory / "jobs", {"memory.limit_in_bytes": str(8 * 2**30),
                             "memory.usage_in_bytes": str(2**30)})
    _group(memory / "jobs" / "run", {"memory.limit_in_bytes": "9223372036854771712",
                                     "memory.usage_in_bytes": str(2**29)})
    membership = "5:cpu:/other\n4:memory:/jobs/run\n0::/\n"
    assert _cgroup_headrooms(membership, tmp_path) == [7 * 2**30]


def test_cgroup_v2_max_is_no_limit_and_a_number_is(tmp_path):
    _group(tmp_path / "a", {"memory.max": str(4 * 2**30), "memory.current": str(2**30)})
    _group(tmp_path / "a" / "b", {"memory.max": "max", "memory.current": str(2**20)})
    assert _cgroup_headrooms("0::/a/b\n", tmp_path) == [3 * 2**30]
    assert _cgroup_headrooms("0::/missing\n", tmp_path) == []


def test_available_memory_is_positive_and_at_most_memavailable():
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo")
    line = next(line for line in meminfo.read_text().splitlines()
                if line.startswith("MemAvailable:"))
    assert 0 < available_memory_bytes() <= int(line.split()[1]) * 1024


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))


def test_loading_products_prefetches_the_maps_files(cache):
    data = load_synthetic_products(SMALL, progress=False, prefetch=True)
    maps = sum((data.folder / f"{name}.npy").stat().st_size for name in ("rowptr", "col", "x"))
    assert data.warmup.bytes_read == maps and data.warmup.skipped is None
    assert load_synthetic_products(SMALL, progress=False, prefetch=False).warmup.bytes_read == 0
    assert load_synthetic_products(SMALL, progress=False).warmup.skipped is None  # fits
