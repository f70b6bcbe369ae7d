"""`gnnforge partition`: writes a loadable dataset, refuses to overwrite one, names errors."""

import json

import pytest

from gnnforge.cli import main
from gnnforge.distributed import load_partition


def test_partition_command_writes_a_loadable_dataset(tmp_path, capsys):
    out = tmp_path / "parts"
    assert main(["partition", "--dataset", "sbm", "--parts", "2", "--method", "random",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "2 parts (random)" in printed and "edge cut" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_parts"] == 2 and set(manifest["balance"]) == {"nodes", "edges", "train"}
    assert sum(p["nodes"] for p in manifest["parts"]) == manifest["num_nodes"] == 2000
    assert load_partition(out, 1).features.shape[1] == manifest["feature_dim"]
    assert main(["partition", "--dataset", "sbm", "--parts", "2", "--out", str(out)]) == 2
    assert "manifest.json exists" in capsys.readouterr().err


def test_partition_command_needs_parts_and_out(capsys):
    assert main(["partition", "--dataset", "sbm", "--out", "x"]) == 2
    assert "--parts is required" in capsys.readouterr().err


def test_partition_command_says_which_constraint_missed_the_tolerance(tmp_path, capsys):
    pytest.importorskip("pymetis")
    out = tmp_path / "parts"
    # 2000 nodes in 3 parts cannot be balanced exactly: tolerance 0 is out of reach.
    with pytest.warns(UserWarning, match=r"within 0% of the mean; reached nodes 1\.\d+"):
        assert main(["partition", "--dataset", "sbm", "--parts", "3", "--tolerance", "0",
                     "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    nodes = manifest["balance"]["nodes"]
    assert nodes > 1.0 and f"nodes {nodes:.3f}" in printed
    assert "(above the tolerance 1.000: nodes" in printed
    sizes = [part["nodes"] for part in manifest["parts"]]
    assert nodes == pytest.approx(max(sizes) / (sum(sizes) / 3))
