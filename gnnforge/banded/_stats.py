"""Bandwidth statistics of a dataset before and after RCM (the paper's Figure 1).

For each graph: nodes N, bandwidth B before and after reordering, and N/B (how much a
banded layout saves over a dense N x N one). For the dataset: the fraction of graphs whose
bandwidth is under each threshold (64 ... 1024), and the time and bandwidth of our RCM
against scipy's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from gnnforge.banded._rcm import bandwidth, rcm_order
from gnnforge.graph import Graph

__all__ = ["BandwidthStats", "bandwidth_stats", "plot_bandwidth_histograms"]

THRESHOLDS = (64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class BandwidthStats:
    """Per-graph sizes and bandwidths, plus RCM timings per method.

    Attributes:
        num_nodes: [G] nodes per graph.
        before: [G] bandwidth in the given order.
        after: {method: [G] bandwidth after that method's RCM}.
        seconds: {method: total seconds spent computing its orders}.
    """

    num_nodes: np.ndarray
    before: np.ndarray
    after: dict[str, np.ndarray]
    seconds: dict[str, float]

    def fraction_under(self, bandwidths: np.ndarray, threshold: int) -> float:
        return float((bandwidths < threshold).mean()) if bandwidths.size else 0.0

    def table(self, thresholds: Sequence[int] = THRESHOLDS) -> str:
        """Plain-text table: fraction under each threshold, median N/B, mean B, time."""
        header = (["order"] + [f"B<{t}" for t in thresholds]
                  + ["mean B", "median N/B", "RCM seconds"])
        rows = [("given", self.before, None)] + [(f"rcm:{m}", b, self.seconds[m])
                                                 for m, b in self.after.items()]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for name, bands, seconds in rows:
            ratio = self.num_nodes / np.maximum(bands, 1)
            cells = [name] + [f"{self.fraction_under(bands, t):.3f}" for t in thresholds]
            cells += [f"{bands.mean():.1f}" if bands.size else "-",
                      f"{np.median(ratio):.2f}" if bands.size else "-",
                      "-" if seconds is None else f"{seconds:.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def bandwidth_stats(graphs: Sequence[Graph], methods: Sequence[str] = ("gnnforge", "scipy"),
                    progress: bool = True) -> BandwidthStats:
    """Bandwidth of every graph before and after RCM with each method (timed)."""
    graphs = list(graphs)
    num_nodes = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    before = np.array([bandwidth(g) for g in graphs], dtype=np.int64)
    if graphs and "gnnforge" in methods:
        rcm_order(graphs[0])  # compile the numba kernel outside the timing
    after, seconds = {}, {}
    for method in methods:
        bands = np.zeros(len(graphs), dtype=np.int64)
        spent = 0.0
        for i, graph in enumerate(tqdm(graphs, desc=f"RCM ({method})", unit="graph",
                                       disable=not progress)):
            start = time.perf_counter()
            order = rcm_order(graph, method)
            spent += time.perf_counter() - start
            bands[i] = bandwidth(graph, order)
        after[method], seconds[method] = bands, spent
    return BandwidthStats(num_nodes, before, after, seconds)


def plot_bandwidth_histograms(stats: BandwidthStats, path: str, method: str = "gnnforge") -> None:
    """Save histograms of bandwidth (given order vs RCM) and of N/B to a PNG."""
    from gnnforge._compat import require

    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    after = stats.after[method]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    top = max(int(stats.before.max(initial=1)), 1)
    bins = np.unique(np.geomspace(1, top + 1, 40).astype(int))
    left.hist(stats.before, bins=bins, alpha=0.6, label="given order")
    left.hist(after, bins=bins, alpha=0.6, label=f"RCM ({method})")
    for threshold in THRESHOLDS:
        left.axvline(threshold, color="grey", lw=0.5, ls="--")
    left.set_xscale("log")
    left.set_xlabel("bandwidth B")
    left.set_ylabel("graphs")
    left.legend()
    right.hist(stats.num_nodes / np.maximum(after, 1), bins=40, color="C1")
    right.set_xlabel("N / B after RCM")
    right.set_ylabel("graphs")
    figure.suptitle(f"{stats.num_nodes.size} graphs")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
