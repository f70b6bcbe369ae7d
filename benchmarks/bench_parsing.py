"""Edge-list parsing speed: gnnforge.data.read_edge_list against np.loadtxt and pandas.

Usage: python benchmarks/bench_parsing.py [--repeats 5]
Reads soc-Slashdot0902 (948,464 lines, gzip) from the shared datasets folder. Every
reader starts from the same gzip file and ends with (src, dst) int64 arrays; each is run
once to warm up, then `--repeats` times; the table shows medians and the ratio to
gnnforge. pandas is skipped (and said so) when it is not installed.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time

import numpy as np

from gnnforge.data import read_edge_list, shared_datasets_dir
from gnnforge.data._table import format_table


def _gnnforge(path):
    graph, _ = read_edge_list(path)
    return graph.src.numpy(), graph.dst.numpy()


def _loadtxt(path):
    table = np.loadtxt(path, comments="#", dtype=np.int64)
    return table[:, 0], table[:, 1]


def _pandas(path):
    import pandas

    frame = pandas.read_csv(path, sep=r"\s+", comment="#", header=None, dtype=np.int64, engine="c")
    return frame[0].to_numpy(), frame[1].to_numpy()


def _median_seconds(reader, path, repeats):
    reader(path)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        reader(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    root = shared_datasets_dir()
    if root is None:
        print("shared datasets folder not found; nothing to measure")
        return 1
    path = root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz"
    readers = {"gnnforge read_edge_list": _gnnforge, "np.loadtxt": _loadtxt}
    try:
        import pandas  # noqa: F401

        readers["pandas.read_csv (C engine)"] = _pandas
    except ImportError:
        print("pandas is not installed: skipping that peer", file=sys.stderr)
    reference = _gnnforge(path)
    rows, base = [], None
    for name, reader in readers.items():
        src, dst = reader(path)
        assert np.array_equal(src, reference[0]) and np.array_equal(dst, reference[1]), name
        seconds = _median_seconds(reader, path, args.repeats)
        base = base or seconds
        rows.append([name, f"{seconds * 1000:.0f}", f"{seconds / base:.1f}x"])
    lines = sum(1 for line in gzip.open(path) if not line.startswith(b"#"))
    print(f"soc-Slashdot0902: {lines:,} edge lines; median of {args.repeats} runs after a warm-up")
    print(format_table(["reader", "median ms", "time vs gnnforge"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
