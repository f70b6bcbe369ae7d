"""benchmarks/end_to_end.py: the DGL models compute what the gnnforge models compute from
the same weights, and a tiny GCN and SAGE row prints a DGL cell (a time where DGL imports,
the reason where it does not). DGL is absent from the project venv: the comparisons skip
there and run in the peers' venv."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
import torch

from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, rmat
from gnnforge.graph import Graph, GraphBatch
from tests.benchmarks._scripts import ROOT, load_script
from tests.nn.test_models import molecules


def _dgl():
    script = load_script("end_to_end")
    if script.dgl_reason() is not None:
        pytest.skip(script.dgl_reason())
    from _end_to_end_dgl import import_dgl

    return script, import_dgl(1)


def _symmetric_graph(num_nodes: int, num_edges: int, seed: int) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    pairs = torch.unique(torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]), dim=1)
    return Graph(pairs[0], pairs[1], num_nodes)


def test_dgl_gcn_computes_the_gnnforge_gcn_from_its_weights():
    script, dgl = _dgl()
    from _end_to_end_dgl import DglGCN, gcn_graph

    graph = _symmetric_graph(60, 300, seed=0)
    x = torch.randn(60, 12)
    torch.manual_seed(0)
    ours = script.OurGCN(12, 16, 5).eval()
    theirs = DglGCN(ours).eval()
    with torch.no_grad():
        expected = ours(graph, x)
        got = theirs(gcn_graph(dgl, graph.src, graph.dst, graph.num_nodes), x)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_dgl_sage_on_converted_blocks_computes_the_gnnforge_sage():
    script, dgl = _dgl()
    from _end_to_end_dgl import DglSAGE, dgl_blocks

    from gnnforge.sampling import NeighborSampler

    graph = rmat(9, 4000, seed=1)
    x = torch.randn(graph.num_nodes, 8)
    blocks = NeighborSampler([3, 3, 3]).sample(graph, torch.arange(20),
                                               generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    ours = script.OurSAGE(8, 16, 4)
    theirs = DglSAGE(ours)
    inputs = x[blocks[0].src_nodes]
    with torch.no_grad():
        torch.testing.assert_close(theirs(dgl_blocks(dgl, blocks), inputs), ours(blocks, inputs),
                                   atol=1e-5, rtol=1e-4)


def test_the_products_models_drop_after_hidden_layers_in_training_only():
    """OurSAGE/PygSAGE/DglSAGE take the examples' dropout; eval mode computes without it."""
    script = load_script("end_to_end")
    from gnnforge.sampling import NeighborSampler

    graph = rmat(9, 4000, seed=1)
    x = torch.randn(graph.num_nodes, 8)
    blocks = NeighborSampler([3, 3, 3]).sample(graph, torch.arange(20),
                                               generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    plain, dropped = script.OurSAGE(8, 16, 4), script.OurSAGE(8, 16, 4, dropout=0.5)
    dropped.load_state_dict(plain.state_dict())
    inputs = x[blocks[0].src_nodes]
    with torch.no_grad():
        assert not torch.equal(dropped(blocks, inputs), plain(blocks, inputs))
        torch.testing.assert_close(dropped.eval()(blocks, inputs), plain(blocks, inputs))
    _assert_pyg_loader_forward_drops_in_training_only(script, graph, x)
    if script.dgl_reason() is None:
        from _end_to_end_dgl import DglSAGE

        assert DglSAGE(dropped).dropout == 0.5 and DglSAGE(plain).dropout == 0.0


def _assert_pyg_loader_forward_drops_in_training_only(script, graph: Graph, x) -> None:
    """The NeighborLoader recipe (a batch without per-hop counts, as torch-sparse's
    sampler gives) drops as PygSAGE does, and equals the plain model in eval mode."""
    from types import SimpleNamespace

    batch = SimpleNamespace(x=x, edge_index=torch.stack([graph.src, graph.dst]),
                            batch_size=20)
    torch.manual_seed(0)
    plain, dropped = script.PygSAGE(8, 16, 4), script.PygSAGE(8, 16, 4, dropout=0.5)
    dropped.load_state_dict(plain.state_dict())
    with torch.no_grad():
        expected = script.pyg_loader_forward(plain, batch)
        assert expected.shape == (20, 4)
        assert not torch.equal(script.pyg_loader_forward(dropped, batch), expected)
        torch.testing.assert_close(script.pyg_loader_forward(dropped.eval(), batch), expected)


def test_dgl_gin_on_batched_molecules_computes_the_gnnforge_gin():
    script, dgl = _dgl()
    from _end_to_end_dgl import DglMoleculeGIN, molecule_graph

    from gnnforge.nn import MoleculeGIN

    graphs = molecules(7, seed=2)
    torch.manual_seed(0)
    ours = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=16, num_layers=3).eval()
    theirs = DglMoleculeGIN(script.PygMoleculeGIN(ours)).eval()
    with torch.no_grad():
        got = theirs(dgl.batch([molecule_graph(dgl, g) for g in graphs]))
        torch.testing.assert_close(got, ours(GraphBatch.from_graphs(graphs)), atol=1e-4,
                                   rtol=1e-4)


def _args(script) -> argparse.Namespace:
    args = argparse.Namespace(sage_epochs=1, sage_steps=1, threads=1)
    reason = script.dgl_reason()
    args.dgl, args.dgl_missing = None, "skipped: for the test"
    if reason is None:
        from _end_to_end_dgl import import_dgl

        args.dgl = import_dgl(1)
    else:
        args.dgl_missing = reason
    return args


def test_tiny_gcn_and_sage_rows_have_a_dgl_cell(capsys):
    script = load_script("end_to_end")
    args = _args(script)
    graph = _symmetric_graph(300, 1500, seed=3)
    x = torch.randn(300, 8)
    y = torch.randint(0, 3, (300,))
    train = torch.rand(300, generator=torch.Generator().manual_seed(0)) < 0.5
    rows: list = []
    script.full_graph_row(rows, "tiny", graph, x, y, train, ~train, 1, args)
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(1))
    script.sampled_row(rows, "tiny", graph, x, y, nodes[:200], nodes[200:], args)
    out = capsys.readouterr().out
    assert len(rows) >= 3  # GCN; SAGE model only; SAGE on gnnforge blocks (+ own samplers)
    for row in rows:
        dgl_ms = row[3]
        if args.dgl is None:
            assert dgl_ms == args.dgl_missing
        else:
            assert float(dgl_ms) >= 0  # printed rounded: a fast host may print 0
            assert row[5].endswith(("(PyG)", "(DGL)"))
    if args.dgl is not None:
        assert "peers' own samplers" in out  # DGL's own pipeline ran


# The products tests keep the user's cache (where a 2,048-node synthetic-products, 4 MB,
# is generated once): a fresh cache folder would also mean recompiling the native kernels.


def test_products_side_trains_the_fixed_steps_and_reports_its_resources():
    script = load_script("end_to_end")
    from _end_to_end_products import run_side

    models = {"OurSAGE": script.OurSAGE, "PygSAGE": script.PygSAGE,
              "pyg_loader_forward": script.pyg_loader_forward}
    sides = ["gnnforge"]
    if script.dgl_reason() is None:
        from _end_to_end_dgl import import_dgl

        models["dgl"] = import_dgl(1)
        sides.append("DGL")
    for side in sides:
        result = run_side(side, 2048, 2, models)
        assert result["side"] == side and result["nodes"] == 2048
        assert result["ms_per_step"] > 0 and result["seeds_per_s"] > 0
        assert result["peak_rss_mib"] >= result["baseline_rss_mib"] > 0
        assert 0 <= result["accuracy"] <= 1 and result["eval_nodes"] > 0


def _end_to_end(*flags: str) -> subprocess.CompletedProcess:
    """The script in a child; a GraphBolt venv only where a test passes --graphbolt-python."""
    env = {name: value for name, value in os.environ.items()
           if name != "GNNFORGE_GRAPHBOLT_PYTHON"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "end_to_end.py"), *flags],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**env, "PYTHONPATH": str(ROOT)})


def _tiny_products(*flags: str) -> tuple[str, list[tuple[str, str]]]:
    """stdout of a 1-step --products run on 2,048 nodes, and its table rows as (label,
    line) in printed order."""
    out = _end_to_end("--products", "--products-nodes", "2048", "--products-steps", "1",
                      *flags)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [(line.split(" | ")[0].removeprefix("| "), line) for line in out.stdout.splitlines()
            if line.startswith("| ") and not line.startswith(("| side", "| ---"))]
    return out.stdout, rows


def test_products_mode_prints_a_row_per_side_and_dropout():
    stdout, lines = _tiny_products("--products-dropout", "0.5,0")
    rows = dict(lines)
    sides = ("gnnforge", "DGL", "PyG", "GraphBolt")
    assert set(rows) == {*sides, *(f"{side} (no dropout)" for side in sides)}
    assert "dropout after each hidden ReLU: 0.5 and none" in stdout
    assert "failed" not in stdout
    assert float(rows["gnnforge"].split(" | ")[1]) >= 0  # printed rounded


def test_products_sides_left_out_get_no_row_and_the_header_names_them():
    stdout, lines = _tiny_products("--products-sides", "gnnforge")
    rows = {label: line.split(" | ")[1] for label, line in lines}
    assert set(rows) == {"gnnforge"} and float(rows["gnnforge"]) >= 0
    assert "not in this run (--products-sides): DGL, PyG, GraphBolt" in stdout


def test_products_sides_must_be_known():
    out = _end_to_end("--products", "--products-sides", "gnnforge,pyg")
    assert out.returncode == 2 and "['pyg']" in out.stderr


def test_products_gcn_sides_compute_the_same_model():
    """Full-graph GCN: every side that runs here takes the same first step (the test
    accuracy after it is equal) and reports its times and resources."""
    script = load_script("end_to_end")
    from _end_to_end_products_gcn import gcn_row, run_gcn_side

    models = {"OurGCN": script.OurGCN, "PygGCN": script.PygGCN}
    sides = ["gnnforge", "PyG"]
    if script.dgl_reason() is None:
        from _end_to_end_dgl import import_dgl

        models["dgl"] = import_dgl(1)
        sides.append("DGL")
    results = [run_gcn_side(side, 2048, 1, models) for side in sides]
    for side, result in zip(sides, results):
        assert result["side"] == side and result["nodes"] == 2048
        assert result["step_s"] > 0 and result["infer_s"] > 0
        assert result["peak_rss_mib"] >= result["baseline_rss_mib"] > 0
        assert gcn_row(result, "").startswith(f"| {side} | ")
    accuracies = [result["accuracy"] for result in results]
    assert max(accuracies) - min(accuracies) <= 0.01  # equal but for near-tied logits


def test_keep_freed_memory_runs_every_side_again_under_the_glibc_tunables():
    """--keep-freed-memory: a second row per side, whose child ran with glibc's tunables."""
    load_script("end_to_end")
    from _end_to_end_products import KEEP_FREED, KEEP_FREED_LABEL, allocator_settings

    plain = allocator_settings(argparse.Namespace(keep_freed_memory=False))
    both = allocator_settings(argparse.Namespace(keep_freed_memory=True))
    assert plain == [("", {})]
    assert both == [("", {}), (f" ({KEEP_FREED_LABEL})", {"GLIBC_TUNABLES": KEEP_FREED})]
    stdout, rows = _tiny_products("--keep-freed-memory")
    sides = ["gnnforge", "DGL", "PyG", "GraphBolt"]
    assert [label for label, _ in rows] == sides + [f"{side} ({KEEP_FREED_LABEL})"
                                                    for side in sides]
    assert "failed" not in stdout


def test_graphbolt_is_skipped_with_the_reason_where_it_cannot_run():
    """Without a GraphBolt that has its operators (DGL 2.1 has none for torch 2.13) the
    side's row says why; the GCN table has no GraphBolt row (a sampling pipeline)."""
    load_script("end_to_end")
    from _end_to_end_graphbolt import graphbolt_python

    python, reason = graphbolt_python(None)
    if python is not None:
        pytest.skip(f"GraphBolt works in {python}")
    assert reason.startswith("skipped: ") and (sys.executable in reason
                                               or "no library for torch" in reason)
    assert graphbolt_python("/nonexistent/python") == (
        None, "skipped: /nonexistent/python does not run ([Errno 2] No such file or directory: "
              "'/nonexistent/python')")
    _, lines = _tiny_products("--products-sides", "GraphBolt")
    assert {label: line.split(" | ")[1] for label, line in lines} == {"GraphBolt": reason}


def test_graphbolt_gets_the_other_sides_initial_weights_as_arrays(tmp_path):
    """write_weights: the state_dict's arrays, which DglSAGE takes (GraphBolt's child has
    no gnnforge to build OurSAGE with), equal to DglSAGE from the model where DGL runs."""
    import numpy as np

    script = load_script("end_to_end")
    from _end_to_end_graphbolt import write_weights

    torch.manual_seed(0)
    ours = script.OurSAGE(8, 16, 4)
    write_weights(tmp_path / "w.npz", ours)
    state = {name: torch.from_numpy(value) for name, value in np.load(tmp_path / "w.npz").items()}
    assert state.keys() == ours.state_dict().keys()
    for name, value in ours.state_dict().items():
        assert torch.equal(state[name], value)
    if script.dgl_reason() is None:
        from _end_to_end_dgl import DglSAGE

        from_model, from_state = DglSAGE(ours), DglSAGE(state, 0.5)
        assert from_state.dropout == 0.5 and from_model.dropout == 0.0
        for a, b in zip(from_model.state_dict().values(), from_state.state_dict().values()):
            assert torch.equal(a, b)


def test_graphbolt_side_trains_the_fixed_steps_where_a_graphbolt_venv_is_named(tmp_path):
    """GNNFORGE_GRAPHBOLT_PYTHON (a benchmarks/graphbolt_venv.sh venv): its child trains the
    fixed steps from the shared weights on a small synthetic-products and reports as the
    other sides do, with its torch."""
    python = os.environ.get("GNNFORGE_GRAPHBOLT_PYTHON")
    if python is None:
        pytest.skip("GNNFORGE_GRAPHBOLT_PYTHON names no GraphBolt venv")
    import json

    script = load_script("end_to_end")
    from _end_to_end_graphbolt import graphbolt_command, graphbolt_python, write_weights

    from gnnforge.data import load_synthetic_products

    assert graphbolt_python(python) == (python, None)
    data = load_synthetic_products(2048, progress=False)
    torch.manual_seed(0)
    write_weights(tmp_path / "w.npz", script.OurSAGE(100, 256, 47))
    command = graphbolt_command(python, data.folder, tmp_path / "w.npz", 2, 1, 0.5)
    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1].split(" ", 1)[1])
    assert result["side"] == "GraphBolt" and result["nodes"] == 2048
    assert result["ms_per_step"] > 0 and result["peak_rss_mib"] >= result["baseline_rss_mib"]
    assert 0 <= result["accuracy"] <= 1 and result["eval_nodes"] > 0
    assert result["torch"] != torch.__version__
    stdout, lines = _tiny_products("--products-sides", "gnnforge,GraphBolt",
                                   "--graphbolt-python", python)
    rows = {label: line.split(" | ") for label, line in lines}
    assert set(rows) == {"gnnforge", "GraphBolt"} and "failed" not in stdout
    assert float(rows["GraphBolt"][1]) >= 0
    assert f"torch {result['torch']} (the other sides {torch.__version__})" in rows["GraphBolt"][-1]
