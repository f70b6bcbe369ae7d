"""Limit search, the report and the CLI on small inputs."""

from __future__ import annotations

import numpy as np
import pytest

from gnnforge.packing import size_histogram
from gnnforge.packing._report import REPORT_ROWS, packing_report
from gnnforge.packing._search import search_limits


@pytest.fixture(scope="module")
def sizes():
    rng = np.random.default_rng(1)
    nodes = rng.integers(3, 30, 400)
    return np.stack([nodes, 2 * nodes + rng.integers(-2, 6, 400)], axis=1)


def test_search_grid_pareto_and_target(sizes, tmp_path):
    histogram = size_histogram(sizes)
    largest = sizes.max(axis=0)
    nodes = [largest[0], 2 * largest[0], 4 * largest[0]]
    edges = [largest[1], 2 * largest[1], 4 * largest[1]]
    result = search_limits(histogram, nodes, edges, max_graphs_per_pack=64, target=0.9)
    assert result.harmonic.shape == (3, 3) and result.num_packs.shape == (3, 3)
    assert (result.harmonic > 0).all() and (result.harmonic <= 1).all()
    points = {(n, e): h for n, e, _, _, h in result.pareto}
    for n, e, h in [(n, e, result.harmonic[i, j]) for i, n in enumerate(result.node_limits)
                    for j, e in enumerate(result.edge_limits)]:
        # nothing on the front is dominated by a grid point
        for (pn, pe), ph in points.items():
            assert not (n <= pn and e <= pe and h > ph + 1e-12)
    assert result.best is not None and result.best[4] >= 0.9
    result.plot(tmp_path / "heat.png")
    assert (tmp_path / "heat.png").stat().st_size > 1000


def test_search_rejects_too_small_limits(sizes):
    with pytest.raises(ValueError, match="largest graph"):
        search_limits(size_histogram(sizes), [5], [500])


def test_report_rows_and_skipped_sources(sizes):
    def missing():
        raise ImportError("no such corpus here")

    lines = []
    packing_report({"toy": lambda: sizes, "absent": missing}, 256, lines.append)
    rows = [line for line in lines if line.startswith("| toy |")]
    assert len(rows) == len(REPORT_ROWS)
    assert any("lpfhp+improve" in row for row in rows)
    refined = [row.split(" | ") for row in rows if "lpfhp+refine" in row]
    assert len(refined) == 1
    packs, ceil_bound, lp_bound = (int(refined[0][i].replace(",", "").split()[0])
                                   for i in (8, 9, 11))
    assert ceil_bound <= lp_bound <= packs
    assert lines[-1] == "skipped absent: no such corpus here"


def test_cli_plan_and_search(tmp_path, capsys, monkeypatch):
    pytest.importorskip("rdkit")
    from gnnforge.cli import main

    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "mols.smi"
    path.write_text("\n".join(["CCO", "c1ccccc1", "CC(=O)Nc1ccccc1", "CCCCCC", "O"] * 20))
    assert main(["pack", "--source", str(path), "--max-graphs", "8"]) == 0
    out = capsys.readouterr().out
    assert "100 graphs" in out and "lpfhp (product)" in out and "gap" in out
    assert main(["pack", "--source", str(path), "--max-graphs", "8", "--refine", "2"]) == 0
    out = capsys.readouterr().out
    assert "LP refinement: bound" in out and "above the proven bound" in out
    plot = tmp_path / "h.png"
    assert main(["pack", "--source", str(path), "--search", "--node-factors", "1", "2",
                 "--edge-factors", "1", "2", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and plot.exists()
