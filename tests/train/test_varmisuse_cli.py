"""`gnnforge train --task varmisuse`: its flags reach the runner, results reach --out-dir."""

from __future__ import annotations

import json

import pytest

from gnnforge.cli import main
from gnnforge.train import ConfigError, load_config
from gnnforge.train._cli import _varmisuse_options

pytest.importorskip("scipy")


def _options(**flags):
    config = load_config({"task": "varmisuse", **flags})
    return _varmisuse_options(config, set(flags))


def test_flags_map_to_the_runner(tmp_path):
    options = _options(block_size=64, slots=512, backend="both", limit=5, layers=2,
                       dataset=str(tmp_path))
    assert options["block_size"] == 64 and options["num_slots"] == 512
    assert options["backends"] == ("sparse", "banded") and options["max_files"] == 5
    assert options["num_steps"] == 2 and options["root"] == str(tmp_path)
    assert _options()["backends"] == ("sparse",) and "root" not in _options()
    assert "root" not in _options(dataset="python-programs")


@pytest.mark.parametrize("flags, message", [
    ({"limit": 0}, "--limit is the number of Python files to parse; 0 would take every"),
    ({"slots": 300}, r"--slots \(300\) must be a multiple of --block-size \(256\)"),
    ({"backend": "gpu"}, "--backend must be one of"),
    ({"block_size": 0}, "--block-size must be >= 1"),
])
def test_bad_varmisuse_values(flags, message):
    with pytest.raises(ConfigError, match=message):
        _options(**flags)


def test_varmisuse_flags_belong_to_varmisuse():
    with pytest.raises(ConfigError, match="--block-size applies to --task varmisuse only"):
        load_config({"task": "graph", "block_size": 64})


@pytest.mark.slow
def test_cli_run_writes_its_results(tmp_path, capsys):
    out = tmp_path / "vm"
    code = main(["train", "--task", "varmisuse", "--limit", "3", "--epochs", "1",
                 "--hidden", "8", "--layers", "1", "--block-size", "64", "--slots", "256",
                 "--no-progress", "--out-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    results = json.loads((out / "varmisuse.json").read_text())
    assert results["config"]["block_size"] == 64 and results["config"]["num_slots"] == 256
    assert [row["train_backend"] for row in results["rows"]] == ["sparse", "sparse"]
    assert (out / "varmisuse.md").read_text().startswith("| trained |")
    assert "| trained |" in captured.out
