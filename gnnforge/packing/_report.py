"""The real-data packing report: the paper's Table 2 for every size source on this machine.

For each source: packing methods and heuristics at the dataset-maximum limits (as in
the paper, 256 graphs per pack), with node and edge efficiency, packs, the lower bound
max_k ceil(total_k / limit_k) and the gap to it, the LP bound (column generation, see
`_column_generation.py`; at least the large-item bound too) and the gap to it, and the
time to build the histogram and pack it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack

__all__ = ["REPORT_ROWS", "packing_report"]

# (method, heuristic, step) rows: the paper's heuristics, then our improvement step and LP
# refinement, then the baselines. step: "" (plain), "improve", "refine" (improve + LP).
REPORT_ROWS: tuple[tuple[str, str, str], ...] = (
    ("lpfhp", "product", ""), ("lpfhp", "sum", ""), ("lpfhp", "max", ""),
    ("lpfhp", "min", ""), ("lpfhp", "nodes", ""), ("lpfhp", "edges", ""),
    ("spfhp", "product", ""), ("lpfhp", "product", "improve"), ("spfhp", "product", "improve"),
    ("lpfhp", "product", "refine"),
    ("none", "product", ""), ("nodes_only", "product", ""), ("edges_only", "product", ""),
)

HEADER = ("| dataset | graphs | bins | limits | method | heuristic | node eff | edge eff | "
          "packs | ceil bound | gap (ceil) | LP bound | gap (LP) | overflow | time (s) |")

# Seconds of LP refinement per dataset in the report (`gnnforge pack --report --refine S`).
DEFAULT_REFINE_SECONDS = 30.0


def _row_name(method: str, step: str) -> str:
    return f"{method}+{step}" if step else method


def _run(histogram: dict, limits: tuple[int, ...], row: tuple[str, str, str],
         max_graphs_per_pack: int | None, refine_seconds: float) -> tuple[object, float]:
    method, heuristic, step = row
    start = time.perf_counter()
    plan = pack(histogram, limits, heuristic, method, max_graphs_per_pack,
                improve=step != "", refine=refine_seconds if step == "refine" else 0.0)
    return plan, time.perf_counter() - start


def source_table(name: str, sizes: np.ndarray, max_graphs_per_pack: int | None = 256,
                 limits: Sequence[int] | None = None,
                 rows: Sequence[tuple[str, str, str]] = REPORT_ROWS,
                 refine_seconds: float = DEFAULT_REFINE_SECONDS) -> list[str]:
    """Markdown table rows for one dataset (sizes [n, 2]).

    The LP bound is a property of the dataset: it comes from the 'refine' row (run
    first), and every row's 'gap (LP)' is measured against it ('(open)' marks a bound
    whose LP was not solved within the budget; it is still a valid bound).
    """
    start = time.perf_counter()
    histogram = size_histogram(sizes)
    histogram_time = time.perf_counter() - start
    limits = tuple(int(v) for v in (sizes.max(axis=0) if limits is None else limits))
    results = {}
    for row in sorted(rows, key=lambda r: r[2] != "refine"):  # the refine row first
        results[row] = _run(histogram, limits, row, max_graphs_per_pack, refine_seconds)
    refined = [plan for row, (plan, _) in results.items() if row[2] == "refine"]
    lp = refined[0].lp if refined else None
    lines = []
    for row in rows:
        plan, elapsed = results[row]
        strong = max(plan.lower_bound, plan.large_item_bound, lp.bound if lp else 0)
        lp_text = "-" if lp is None else f"{strong:,}" + ("" if lp.converged else " (open)")
        lp_gap = "-" if lp is None else f"{100 * (plan.num_packs / strong - 1):.2f}%"
        over = ", ".join(f"{'ne'[k]}: {o[0]} packs, max +{o[1]}"
                         for k, o in enumerate(plan.overflow) if o[0]) or "-"
        lines.append(
            f"| {name} | {sizes.shape[0]:,} | {len(histogram)} | {limits[0]}/{limits[1]} | "
            f"{_row_name(row[0], row[2])} | {plan.heuristic} | "
            f"{100 * plan.efficiency[0]:.2f}% | {100 * plan.efficiency[1]:.2f}% | "
            f"{plan.num_packs:,} | {plan.lower_bound:,} | {100 * plan.gap:.2f}% | {lp_text} | "
            f"{lp_gap} | {over} | {histogram_time + elapsed:.3f} |")
    return lines


def packing_report(sources: dict[str, Callable[[], np.ndarray]],
                   max_graphs_per_pack: int | None = 256,
                   print_line: Callable[[str], None] = print,
                   refine_seconds: float = DEFAULT_REFINE_SECONDS) -> list[str]:
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
        for line in source_table(name, sizes, max_graphs_per_pack,
                                 refine_seconds=refine_seconds):
            print_line(line)
            lines.append(line)
    for line in skipped:
        print_line(line)
    return lines + skipped
