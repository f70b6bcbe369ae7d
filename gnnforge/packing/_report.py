"""The real-data packing report: the paper's Table 2 for every size source on this machine.

For each source: packing methods and heuristics at the dataset-maximum limits (as in
the paper, 256 graphs per pack), with node and edge efficiency, packs, the lower bound
max_k ceil(total_k / limit_k), the gap to it, and the time to build the histogram and
pack it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack

__all__ = ["REPORT_ROWS", "packing_report"]

# (method, heuristic, improve) rows, the paper's heuristics then the baselines.
REPORT_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("lpfhp", "product", False), ("lpfhp", "sum", False), ("lpfhp", "max", False),
    ("lpfhp", "min", False), ("lpfhp", "nodes", False), ("lpfhp", "edges", False),
    ("spfhp", "product", False), ("lpfhp", "product", True), ("spfhp", "product", True),
    ("none", "product", False), ("nodes_only", "product", False),
    ("edges_only", "product", False),
)

HEADER = ("| dataset | graphs | bins | limits | method | heuristic | node eff | edge eff | "
          "packs | lower bound | gap | overflow | time (s) |")


def _row_name(method: str, improve: bool) -> str:
    return f"{method}+improve" if improve else method


def source_table(name: str, sizes: np.ndarray, max_graphs_per_pack: int | None = 256,
                 limits: Sequence[int] | None = None,
                 rows: Sequence[tuple[str, str, bool]] = REPORT_ROWS) -> list[str]:
    """Markdown table rows for one dataset (sizes [n, 2])."""
    start = time.perf_counter()
    histogram = size_histogram(sizes)
    histogram_time = time.perf_counter() - start
    limits = tuple(int(v) for v in (sizes.max(axis=0) if limits is None else limits))
    lines = []
    for method, heuristic, improve in rows:
        start = time.perf_counter()
        plan = pack(histogram, limits, heuristic, method, max_graphs_per_pack, improve=improve)
        elapsed = histogram_time + time.perf_counter() - start
        over = ", ".join(f"{'ne'[k]}: {o[0]} packs, max +{o[1]}"
                         for k, o in enumerate(plan.overflow) if o[0]) or "-"
        lines.append(
            f"| {name} | {sizes.shape[0]:,} | {len(histogram)} | {limits[0]}/{limits[1]} | "
            f"{_row_name(method, improve)} | {plan.heuristic} | "
            f"{100 * plan.efficiency[0]:.2f}% | {100 * plan.efficiency[1]:.2f}% | "
            f"{plan.num_packs:,} | {plan.lower_bound:,} | {100 * plan.gap:.2f}% | {over} | "
            f"{elapsed:.3f} |")
    return lines


def packing_report(sources: dict[str, Callable[[], np.ndarray]],
                   max_graphs_per_pack: int | None = 256,
                   print_line: Callable[[str], None] = print) -> list[str]:
    """Print (and return) the table for every source; missing sources print why."""
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for line in lines:
        print_line(line)
    skipped = []
    for name, load in sources.items():
        try:
            sizes = np.asarray(load(), dtype=np.int64).reshape(-1, 2)
        except (ImportError, FileNotFoundError, OSError) as error:
            skipped.append(f"skipped {name}: {error}")
            continue
        if sizes.shape[0] == 0:
            skipped.append(f"skipped {name}: no graphs")
            continue
        for line in source_table(name, sizes, max_graphs_per_pack):
            print_line(line)
            lines.append(line)
    for line in skipped:
        print_line(line)
    return lines + skipped
