"""Dataset compilation: supergraph assembly, consistent permutation, drop counts, cache, CLI."""

from __future__ import annotations

import torch

from gnnforge import Graph
from gnnforge.banded import (
    assemble_supergraphs,
    bandwidth_stats,
    compile_dataset,
    plot_bandwidth_histograms,
    rcm_order,
)
from gnnforge.cli import main
from gnnforge.data import grid_2d


def test_assemble_never_splits_and_skips_oversized():
    groups, skipped = assemble_supergraphs([3, 4, 2, 9, 5, 1], num_slots=8)
    assert groups == [[0, 1], [2, 4, 5]] and skipped == [3]
    assert assemble_supergraphs([], 8) == ([], [])


def _labelled(graph, seed):
    label = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    return graph.with_node_data(label=label)


def test_compile_dataset_permutes_data_and_counts_drops(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    wide = Graph(torch.randint(0, 40, (300,), generator=g),
                 torch.randint(0, 40, (300,), generator=g), 40)
    graphs = [_labelled(grid_2d(5, 6, shuffle=True, seed=1), 0), _labelled(wide, 1),
              _labelled(grid_2d(20, 20), 2)]
    compiled = compile_dataset(graphs, block_size=8, num_blocks=9, progress=False)
    assert compiled.skipped == [2]  # 400 nodes > 72 slots
    assert compiled.supergraphs == [[0, 1]]
    for original, order, reordered in zip(graphs, compiled.orders, compiled.graphs):
        assert torch.equal(reordered.node_data["label"], original.node_data["label"][order])
    batch, blocks = compiled.supergraph(0)
    assert batch.num_nodes == 72 and blocks.num_blocks == 9
    assert blocks.num_dropped == int(compiled.dropped.sum()) > 0  # the random graph spills
    assert int(compiled.dropped[0]) == 0  # the grid's RCM bandwidth (<= 6) fits S=8
    report = compiled.report()
    assert f"dropped edges: {int(compiled.dropped.sum())}" in report and "1 skipped" in report
    assert int(compiled.bandwidth_after[0]) <= int(compiled.bandwidth_before[0])
    cached = compile_dataset(graphs, block_size=8, num_blocks=9, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(cached.orders, compiled.orders))
    assert len(list(tmp_path.glob("banded-*.npz"))) == 1
    plain = compile_dataset(graphs, 8, 9, reorder=False, use_cache=False, progress=False)
    assert all(torch.equal(o, torch.arange(g.num_nodes)) for o, g in zip(plain.orders, graphs))


def test_stats_plot_and_cli(tmp_path, monkeypatch, capsys):
    graphs = [grid_2d(6, 9, shuffle=True, seed=s) for s in range(4)]
    stats = bandwidth_stats(graphs, progress=False)
    assert (stats.after["gnnforge"] <= stats.before).all()
    assert stats.fraction_under(stats.after["gnnforge"], 64) == 1.0
    assert rcm_order(graphs[0]).numel() == 54
    plot_bandwidth_histograms(stats, str(tmp_path / "hist.png"))
    assert (tmp_path / "hist.png").stat().st_size > 1000
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "src"
    root.mkdir()
    (root / "a.py").write_text("def f(a):\n    b = a\n    return b\n\n"
                               "def g(x):\n    return x + 1\n")
    assert main(["reorder", "--root", str(root), "--block-size", "8", "--num-blocks", "2",
                 "--plot", str(tmp_path / "cli.png")]) == 0
    out = capsys.readouterr().out
    assert "rcm:scipy" in out and "dropped edges" in out and (tmp_path / "cli.png").exists()
