import argparse

import pytest

from gnnforge.cli import COMMANDS
from gnnforge.sampling import _cli
from gnnforge.sampling._datasets import load
from gnnforge.sampling._measure import measure, work_curve


def main(argv):
    """`gnnforge sample ...` through this package's parser only.

    The real router imports every capability's CLI, which ties this test to other packages.
    """
    assert argv[0] == "sample" and COMMANDS["sample"] == "gnnforge.sampling._cli"
    parser = argparse.ArgumentParser(prog="gnnforge sample")
    _cli.configure(parser)
    return _cli.run(parser.parse_args(argv[1:]))


def test_sample_curve_prints_table_and_plot(tmp_path, capsys):
    plot = tmp_path / "work.png"
    assert main(["sample", "--graph", "rmat", "--sampler", "ns,labor0", "--fanouts", "5,5",
                 "--curve", "--batch-sizes", "64,512", "--batches", "1",
                 "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert out.count("| rmat |") == 4 and plot.stat().st_size > 1000


def test_unknown_sampler_is_rejected(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "--sampler", "gibbs"])
    assert "choose from" in capsys.readouterr().err


def test_work_per_seed_falls_with_batch_size():
    graph = load("rmat").graph
    small, large = (measure(graph, "g", "ns", [5, 5], b, 2) for b in (32, 2048))
    assert large.vertices[0] / 2048 < small.vertices[0] / 32  # overlap: concave work
    assert large.vertices_per_epoch < small.vertices_per_epoch
    assert len(work_curve({"g": graph}, ["labor0"], [3], [16], 1)) == 1


def test_real_graph_loads(datasets_dir):
    data = load("facebook")
    assert data.graph.num_nodes == 22470 and data.labels.max() == 3
    assert data.features.shape == (22470, 128)
