"""Reading a dataset's files into memory: when it happens, what it reads, the memory it sees."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import _huge_pages
from gnnforge.data import load_synthetic_products
from gnnforge.data._in_memory import (_cgroup_headrooms, available_memory_bytes,
                                      read_into_memory, read_npy)

SMALL = 4096
MiB = 2**20


def _npy(folder: Path, name: str, array: np.ndarray) -> Path:
    path = folder / name
    np.save(path, array)
    return path


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 7), min_size=0, max_size=3),
       dtype=st.sampled_from([np.int32, np.int64, np.float32, np.float64, np.int16, np.uint8]),
       fortran=st.booleans())
def test_read_npy_is_np_load(tmp_path_factory, shape, dtype, fortran):
    folder = tmp_path_factory.mktemp("npy")
    values = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
    path = _npy(folder, "a.npy", np.asfortranarray(values) if fortran else values)
    advanced = []
    array = read_npy(path, advanced.append)
    expected = np.load(path)
    assert array.shape == expected.shape and array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected)
    assert array.flags.f_contiguous == expected.flags.f_contiguous
    assert sum(advanced) == path.stat().st_size


def test_read_npy_starts_on_a_huge_page_and_asks_for_huge_pages(tmp_path, monkeypatch):
    advised = []
    monkeypatch.setattr(_huge_pages, "advise_huge",
                        lambda address, nbytes: advised.append((address, nbytes)))
    path = _npy(tmp_path, "x.npy", np.ones((3 * MiB // 400 + 1, 100), np.float32))
    array = read_npy(path)
    assert array.ctypes.data % _huge_pages.HUGE_PAGE_BYTES == 0
    assert advised == [(array.ctypes.data, array.nbytes)]
    assert array.flags.writeable and array.base is not None


def test_bad_files_are_named(tmp_path):
    text = tmp_path / "text.npy"
    text.write_bytes(b"not an array")
    with pytest.raises(ValueError, match=f"{text}: not a .npy array"):
        read_npy(text)
    torn = tmp_path / "torn.npy"  # numpy's tokenizer, not ValueError, rejects this header
    header = b"{'descr': '<f8', 'shape': (3,".ljust(53) + b"\n"
    torn.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    with pytest.raises(ValueError, match=f"{torn}: not a .npy array"):
        read_npy(torn)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=f"{objects}: holds Python objects"):
        read_npy(objects)
    short = _npy(tmp_path, "short.npy", np.arange(1000, dtype=np.int64))
    short.write_bytes(short.read_bytes()[:-8])
    with pytest.raises(ValueError, match=f"{short}: ends after 7,992 of 8,000 data bytes"):
        read_npy(short)


def test_auto_reads_what_fits_in_half_the_available_memory(tmp_path):
    paths = [_npy(tmp_path, "x.npy", np.zeros(MiB // 8 - 16, np.float64))]  # 1 MiB file
    read, warmup = read_into_memory(paths, available=2 * MiB, progress=False)
    assert warmup.skipped is None and warmup.bytes_read == MiB
    assert "1 MiB read into memory (huge pages)" in warmup.describe()
    np.testing.assert_array_equal(read[0], np.load(paths[0]))
    read, skipped = read_into_memory(paths, available=2 * MiB - 1, progress=False)
    assert read is None and skipped.bytes_read == 0
    assert skipped.skipped == "1 MiB of files, more than 50% of 2 MiB available"
    assert skipped.describe().startswith("memory-mapped, not read into memory (1 MiB of files")


def test_forced_either_way_whatever_the_memory(tmp_path):
    paths = [_npy(tmp_path, "x.npy", np.zeros(MiB // 8 - 16, np.float64))]
    read, warmup = read_into_memory(paths, prefetch=True, available=0, progress=False)
    assert warmup.bytes_read == MiB and len(read) == 1
    read, never = read_into_memory(paths, prefetch=False, progress=False)
    assert read is None and (never.bytes_read, never.skipped) == (0, "prefetch=False")


def test_a_bad_prefetch_value_is_named(tmp_path):
    with pytest.raises(TypeError, match="prefetch must be True, False or None, got 'yes'"):
        read_into_memory([_npy(tmp_path, "x.npy", np.zeros(3))], prefetch="yes")


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


def test_loading_products_reads_the_maps_files_into_memory(cache):
    data = load_synthetic_products(SMALL, progress=False, prefetch=True)
    files = sum((data.folder / f"{name}.npy").stat().st_size for name in ("rowptr", "col", "x"))
    assert data.warmup.bytes_read == files and data.warmup.skipped is None
    mapped = load_synthetic_products(SMALL, progress=False, prefetch=False)
    assert mapped.warmup.bytes_read == 0
    for name in ("rowptr", "col"):
        assert isinstance(getattr(mapped, name), np.memmap), name
        assert not isinstance(getattr(data, name), np.memmap), name
        np.testing.assert_array_equal(getattr(data, name), getattr(mapped, name))
    assert data.x.numpy().ctypes.data % _huge_pages.HUGE_PAGE_BYTES == 0
    assert mapped.x.numpy().base is not None and data.x.equal(mapped.x)
    assert load_synthetic_products(SMALL, progress=False).warmup.skipped is None  # fits
