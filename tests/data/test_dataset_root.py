"""GNNFORGE_DATASETS pointing nowhere is an error; SMILES files are discovered by content."""

from __future__ import annotations

import gzip

import pytest

from gnnforge.cli import main
from gnnforge.data import discover_datasets, shared_datasets_dir


def test_a_missing_datasets_folder_is_an_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GNNFORGE_DATASETS", str(tmp_path / "missing"))
    with pytest.raises(NotADirectoryError, match="GNNFORGE_DATASETS=.*missing.* is not a "
                                                 "directory"):
        shared_datasets_dir()
    assert main(["datasets", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a directory" in err[0]
    monkeypatch.setenv("GNNFORGE_DATASETS", str(tmp_path))
    assert shared_datasets_dir() == tmp_path


def test_smiles_files_are_discovered_by_content(tmp_path):
    folder = tmp_path / "zinc_subset"
    folder.mkdir()
    (folder / "esol.csv").write_text("name,logS,smiles\nethanol,0.1,CCO\nwater,1.0,O\n")
    with gzip.open(folder / "test.txt.gz", "wt") as handle:
        handle.write("CCO\nc1ccccc1\nC[C@@H](N)C(=O)O\n")
    (folder / "edges.txt").write_text("0 1\n1 2\n")
    found = {s.name: s.fmt for s in discover_datasets(tmp_path)}
    assert found == {"esol": "smiles", "zinc-test": "smiles", "edges": "edges"}
