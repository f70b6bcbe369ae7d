"""The default decompression cap follows the input: 50x its compressed size (at least
8 MiB, at most the absolute cap), checked while streaming on every compressed path
(gzip text, gzip SMILES read line by line, zip members, graph store members), and a
199 KiB bomb is refused after a few MiB of memory, not gigabytes."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from gnnforge.data import DataFormatError, load_graphs, read_edge_list, read_smiles
from gnnforge.data._limits import (LIMIT_VARIABLE, MAX_RATIO, MIN_LIMIT_BYTES,
                                   decompressed_limit, read_zip_member)
from tests._timeouts import SUBPROCESS_TIMEOUT_S


@pytest.fixture(autouse=True)
def _default_limit(monkeypatch):
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)


def _gzip_bomb(path, mebibytes: int, first: bytes = b"0 1\n"):
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(first)
        for _ in range(mebibytes):
            handle.write(b"0 0\n" * (2**20 // 4))
    return path


def test_the_default_limit_is_a_ratio_of_the_compressed_size(monkeypatch):
    absolute = decompressed_limit()
    assert decompressed_limit(10) == MIN_LIMIT_BYTES
    assert decompressed_limit(2**20) == max(MIN_LIMIT_BYTES, MAX_RATIO * 2**20)
    assert decompressed_limit(2**40) == absolute <= 4 * 2**30
    monkeypatch.setenv(LIMIT_VARIABLE, "3")
    assert decompressed_limit(10) == decompressed_limit(2**40) == 3 * 2**20


def test_a_gzip_edge_list_bomb_stops_at_the_ratio(tmp_path):
    path = _gzip_bomb(tmp_path / "edges.txt.gz", 200)
    limit = MAX_RATIO * path.stat().st_size
    assert MIN_LIMIT_BYTES < limit < 200 * 2**20
    with pytest.raises(DataFormatError, match=rf"edges\.txt\.gz: decompresses to more than "
                                              rf"{limit / 2**20:.0f} MiB.*{LIMIT_VARIABLE}"):
        read_edge_list(path)


def test_real_compression_ratios_pass(tmp_path):
    """A SNAP-like edge list sorted by source (more compressible than random pairs),
    larger than the minimum limit: its ratio is far below 50x."""
    rng = np.random.default_rng(0)
    pairs = np.sort(rng.integers(0, 10**6, size=(800_000, 2)), axis=0)
    text = "".join(f"{a}\t{b}\n" for a, b in pairs).encode()
    path = tmp_path / "real.txt.gz"
    path.write_bytes(gzip.compress(text))
    assert len(text) > MIN_LIMIT_BYTES and len(text) < 10 * path.stat().st_size
    assert read_edge_list(path)[0].num_edges == 800_000


def test_a_gzip_smiles_bomb_is_capped_while_reading_lines(tmp_path):
    path = tmp_path / "mols.csv.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b"smiles,y\nCCO,1\n")
        for _ in range(40):
            handle.write(b"C" * 2**20)
    with pytest.raises(ValueError, match=r"mols\.csv\.gz.*decompresses to more than"):
        read_smiles(path)


def test_a_zip_member_is_capped_by_its_own_compressed_size(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("small.txt", b"0 1\n")
        archive.writestr("big.txt", b"\0" * (20 * 2**20))
    with zipfile.ZipFile(path) as archive:
        assert read_zip_member(archive, "small.txt", "x") == b"0 1\n"
        with pytest.raises(DataFormatError, match=r"x: decompresses to more than 8 MiB"):
            read_zip_member(archive, "big.txt", "x")


def test_a_graph_store_member_declaring_a_bomb_is_refused_before_reading(tmp_path):
    array = io.BytesIO()
    np.lib.format.write_array(array, np.zeros(20 * 2**20, np.uint8))
    path = tmp_path / "graphs.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("checksum.npy", array.getvalue())
    with pytest.raises(DataFormatError, match=r"graphs\.npz\[checksum\.npy\]: declares 20 MiB "
                                              r"from \d+ compressed bytes"):
        load_graphs(path)


_MEMORY_PROBE = textwrap.dedent("""
    import resource, sys
    from gnnforge.data import DataFormatError, read_edge_list
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        read_edge_list(sys.argv[1])
    except DataFormatError as error:
        print("refused:", error)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("grew_mib", (after - before) / 1024)
""")


def test_a_199_kib_bomb_is_refused_within_a_few_mib(tmp_path):
    """The reported case: 199 KiB of gzip that expands to about 200 MiB used to be read
    whole (2.2 GiB peak). Now reading stops at 50x, about 10 MiB of text."""
    path = _gzip_bomb(tmp_path / "bomb.txt.gz", 200)
    assert 190 * 2**10 < path.stat().st_size < 215 * 2**10
    result = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(path)],
                            capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout and "decompresses to more than 10 MiB" in result.stdout
    grew = float(result.stdout.split("grew_mib")[1])
    assert grew < 40, result.stdout


def test_a_mat_file_whose_variables_inflate_past_the_cap_is_refused_before_scipy(tmp_path):
    scipy_io = pytest.importorskip("scipy.io")
    from gnnforge.data import read_mat_graph

    path = tmp_path / "bomb.mat"
    scipy_io.savemat(path, {"Problem": {"A": np.zeros((3000, 10_000))}}, do_compression=True)
    with pytest.raises(DataFormatError, match=r"bomb\.mat: its compressed variables inflate "
                                              r"to more than \d+ MiB"):
        read_mat_graph(path)
