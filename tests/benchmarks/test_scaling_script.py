"""benchmarks/scaling.py: small sizes end to end (both measurements, table, plot).

Printed times are rounded, so they are checked to parse and be >= 0, never > 0: a fast
host prints a small size's time as 0.0, and tests assert nothing a timing can change.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.graph import Graph
from gnnforge.sampling import NeighborSampler
from tests.benchmarks._scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_fanout_bound_of_the_products_workload():
    """Batch 1024, fanouts [15, 10, 5]: 1024*5 + 6144*10 + 67584*15 edges."""
    assert load_script("scaling").fanout_bound(1024, [15, 10, 5]) == 1_080_320
    assert load_script("scaling").fanout_bound(7, []) == 0


def test_fanout_bound_is_reached_when_no_picks_coincide():
    """One layer over a graph whose destinations have disjoint in-neighbours: every pick
    is a new source, so the step holds exactly the bound."""
    batch, fanout = 6, 4
    dst = torch.arange(batch).repeat_interleave(fanout + 2)     # degree 6 > fanout
    src = torch.arange(batch, batch + dst.numel())
    graph = Graph(src, dst, num_nodes=batch + dst.numel())
    blocks = NeighborSampler([fanout]).sample(graph, torch.arange(batch),
                                               generator=torch.Generator().manual_seed(0))
    assert blocks[0].num_edges == load_script("scaling").fanout_bound(batch, [fanout])


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(1, 60), edges=st.integers(0, 400), batch=st.integers(1, 8),
       fanouts=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_a_sampled_step_never_exceeds_the_fanout_bound(nodes, edges, batch, fanouts, seed):
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, nodes, (2, edges), generator=generator)
    seeds = torch.randperm(nodes, generator=generator)[:batch]
    blocks = NeighborSampler(fanouts).sample(Graph(index[0], index[1], num_nodes=nodes), seeds,
                                             generator=generator)
    total = sum(block.num_edges for block in blocks)
    assert total <= load_script("scaling").fanout_bound(seeds.numel(), fanouts)


def test_scaling_prints_a_row_per_size_and_writes_the_plot(tmp_path):
    png = tmp_path / "scaling.png"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes",
                          "11", "--steps", "2", "--repeats", "1", "--png", str(png)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 2^")]
    assert len(rows) == 1 and "failed" not in rows[0]
    cells = rows[0].split(" | ")
    assert cells[0] == "| 2^11 (2,048)" and float(cells[2]) >= 0 and cells[3] == "1.00x"
    input_nodes, sampled_edges = (int(cell.replace(",", "")) for cell in cells[4:6])
    assert 0 < input_nodes <= 2048 and sampled_edges > 0
    bound = load_script("scaling").fanout_bound(1024, [15, 10, 5])
    assert cells[6] == f"{sampled_edges / bound:.0%}"          # of the fanouts' bound
    assert float(cells[7]) >= 0 and cells[8] == "1.00x"        # time per 1k sampled edges
    assert cells[10] == "not run (no --dgl)" and cells[11] == "n/a"
    assert float(cells[13]) >= 0 and cells[14] == "1.00x"      # full graph, per edge
    assert "sampled time per step: max/min = 1.00" in out.stdout
    assert "sampled time per sampled edge: max/min = 1.00" in out.stdout
    assert f"max/min = 1.00 ({cells[6]}-{cells[6]} of the fanouts' bound)" in out.stdout
    assert png.stat().st_size > 1000


def test_median_round_keeps_the_middle_round_or_the_first_failure():
    median_round = load_script("scaling").median_round
    rounds = [{"ms_per_step": ms, "round": i} for i, ms in enumerate((30.0, 10.0, 20.0))]
    assert median_round(rounds)["round"] == 2
    assert median_round(rounds[:2])["round"] == 1                # even count: lower middle
    assert median_round([rounds[0], "failed (exit 1: x)", "failed (exit 2: y)"]) == \
        "failed (exit 1: x)"


def test_sizes_outside_full_sizes_are_sampled_only_and_rounds_run_sizes_in_turn():
    """--full-sizes 10 with --rounds 2 (one run for both: each costs a child per size)."""
    command = [sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes", "10,11",
               "--full-sizes", "10", "--steps", "1", "--repeats", "1"]
    out = subprocess.run([*command, "--rounds", "2"], capture_output=True, text=True,
                         cwd=ROOT, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 2^")]
    assert len(rows) == 2 and "failed" not in out.stdout
    assert "not in --full-sizes" not in rows[0]
    assert float(rows[1].split(" | ")[2]) >= 0                 # 2^11 sampled ran
    assert "not run (not in --full-sizes 10)" in rows[1]
    assert "full graph: median of 1 at 2^10;" in out.stdout
    assert "the median of 2 round(s) over the sizes in turn" in out.stdout
    order = [line.split(": ")[1] for line in out.stderr.splitlines() if "round " in line]
    assert order == ["2^10 sampled", "2^11 sampled"] * 2
    for log2 in (10, 11):
        by_round = next(line for line in out.stdout.splitlines()
                        if line.startswith(f"2^{log2} sampled s/100 steps by round: "))
        assert len(by_round.split(": ")[1].split(", ")) == 2
    bad = subprocess.run([*command, "--rounds", "0"], capture_output=True, text=True,
                         cwd=ROOT, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 2 and "--rounds must be at least 1, got 0" in bad.stderr


def test_dgl_column_says_why_when_dgl_does_not_import(tmp_path):
    """--dgl in an environment without DGL (the project's own): a reason, not a failure."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--sizes",
                          "10", "--steps", "1", "--repeats", "1", "--dgl"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| 2^10"))
    dgl_cell = row.split(" | ")[10]
    if importlib.util.find_spec("dgl") is None:
        assert dgl_cell == "DGL skipped: not installed"
    else:  # the peers venv: DGL measured
        assert float(dgl_cell) >= 0 and row.split(" | ")[11] == "1.00x"
        assert "DGL's sampled time per step: max/min = 1.00" in out.stdout
