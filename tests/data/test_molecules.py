"""Molecules from SMILES: OGB feature known answers, sources, invalid SMILES reporting."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

pytest.importorskip("rdkit")

from gnnforge.data import (  # noqa: E402
    ATOM_FEATURE_DIMS,
    BOND_FEATURE_DIMS,
    load_molecules,
    molecule_files,
    molecule_sizes,
    read_smiles,
    smiles_to_graph,
)


def test_benzene():
    graph = smiles_to_graph("c1ccccc1")
    assert graph.num_nodes == 6 and graph.num_edges == 12
    x, attr = graph.node_data["x"], graph.edge_data["edge_attr"]
    assert x.shape == (6, 9) and attr.shape == (12, 3)
    # carbon (6 -> index 5), no chirality, total degree 3, charge 0 (index 5), 1 H,
    # no radicals, SP2 (index 1), aromatic, in ring
    assert x[0].tolist() == [5, 0, 3, 5, 1, 0, 1, 1, 1]
    assert attr[0].tolist() == [3, 0, 1]  # aromatic bond, no stereo, conjugated
    # both directions of every bond, consecutive
    assert graph.src[0::2].tolist() == graph.dst[1::2].tolist()
    assert graph.dst[0::2].tolist() == graph.src[1::2].tolist()


def test_known_features():
    ethanol = smiles_to_graph("CCO")
    assert ethanol.num_nodes == 3 and ethanol.num_edges == 4
    assert ethanol.node_data["x"][:, 0].tolist() == [5, 5, 7]  # C, C, O
    assert bool((ethanol.node_data["x"][:, 7] == 0).all())  # not aromatic
    assert ethanol.edge_data["edge_attr"][:, 0].tolist() == [0, 0, 0, 0]  # single
    charged = smiles_to_graph("[NH4+]")
    assert charged.node_data["x"][0, 3] == 6 and charged.node_data["x"][0, 4] == 4
    chiral = smiles_to_graph("C[C@H](N)O")
    assert chiral.node_data["x"][1, 1] in (1, 2)
    alkene = smiles_to_graph("C/C=C/C")
    assert alkene.edge_data["edge_attr"][2, 0] == 1  # double bond
    assert alkene.edge_data["edge_attr"][2, 1] == 2  # STEREOE
    single_atom = smiles_to_graph("[Na+]")
    assert single_atom.num_edges == 0 and single_atom.edge_data["edge_attr"].shape == (0, 3)
    assert ATOM_FEATURE_DIMS == (119, 5, 12, 12, 10, 6, 6, 2, 2)
    assert BOND_FEATURE_DIMS == (5, 6, 2)


def test_invalid_smiles_raise():
    with pytest.raises(ValueError, match="cannot parse"):
        smiles_to_graph("C1CC")


def _write(path, text):
    with gzip.open(path, "wt") as handle:
        handle.write(text)


def test_csv_with_labels_and_invalid(tmp_path):
    path = tmp_path / "tiny.csv.gz"
    _write(path, "name,smiles,a,b\nx,CCO,1.5,\ny,not_a_smiles,2,0\nz,c1ccccc1,,3\n")
    smiles, labels, names = read_smiles(path)
    assert smiles == ["CCO", "not_a_smiles", "c1ccccc1"] and names == ["a", "b"]
    assert np.isnan(labels[0, 1]) and labels[2, 1] == 3
    with pytest.warns(UserWarning, match="1 of 3 SMILES could not be parsed"):
        graphs, meta = load_molecules(path, use_cache=False, progress=False)
    assert len(graphs) == 2 and meta["num_invalid"] == 1
    assert [tuple(x) for x in meta["invalid"]] == [(1, "not_a_smiles")]
    assert meta["index"] == [0, 2]
    assert graphs[0].graph_data["y"].tolist() == [1.5, 0.0]
    assert graphs[0].graph_data["y_mask"].tolist() == [True, False]
    assert graphs[1].graph_data["y"].dtype == torch.float32


def test_cache_hit_reports_invalid_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "mols.smi"
    path.write_text("SMILES\nCC\nC1CC\nCCN\n")
    with pytest.warns(UserWarning, match="1 of 3"):
        first, meta = load_molecules(path, progress=False)
    with pytest.warns(UserWarning, match="1 of 3"):
        second, again = load_molecules(path, progress=False)
    assert first == second and again["num_invalid"] == 1


def test_sizes_path_equals_graph_path(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "mols.csv"
    path.write_text("smiles,y\nCC(=O)O,1\n[H]C([H])([H])Cl,2\nC1CC,3\nc1ccncc1,\n")
    with pytest.warns(UserWarning):
        graphs, _ = load_molecules(path, progress=False)
    for use_cache in (True, True):  # build, then read the cache
        with pytest.warns(UserWarning, match="1 of 4"):
            sizes, meta = molecule_sizes(path, progress=False, use_cache=use_cache, workers=1)
        assert sizes.tolist() == [[g.num_nodes, g.num_edges] for g in graphs]
        assert meta["num_invalid"] == 1


def test_bad_columns(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="no SMILES column"):
        read_smiles(path)
    path.write_text("smiles,y\nCC,abc\n")
    assert read_smiles(path)[2] == []  # a text column is not taken as a label
    with pytest.raises(ValueError, match="not a number"):
        read_smiles(path, label_columns=["y"])
    with pytest.raises(ValueError, match="not in header"):
        read_smiles(path, label_columns=["z"])
    with pytest.raises(FileNotFoundError, match="neither"):
        read_smiles(tmp_path / "missing.csv")


def test_nci_builtin():
    with pytest.warns(UserWarning, match="could not be parsed"):
        graphs, meta = load_molecules("nci", progress=False)
    assert meta["num_smiles"] == 4999
    assert len(graphs) + meta["num_invalid"] == 4999
    assert all(g.node_data["x"].shape[1] == 9 for g in graphs[:50])


def test_moses_file_is_found_without_importing_moses():
    import sys

    files = molecule_files()
    if "moses" not in files:
        pytest.skip("molsets not installed")
    assert files["moses"].name == "train.csv.gz"
    assert "moses" not in sys.modules


def test_shared_moleculenet_files(datasets_dir):
    files = molecule_files(datasets_dir)
    for name in ("tox21", "BBBP", "qm9_qm9", "zinc_valid"):
        assert name in files
    smiles, labels, names = read_smiles(files["tox21"])
    assert len(smiles) == 7831 and labels.shape == (7831, 12) and names[0] == "NR-AR"
    assert np.isnan(labels).any()  # tox21 has missing labels
    graphs, meta = load_molecules(files["SAMPL"], progress=False)
    assert len(graphs) == 642 and meta["num_invalid"] == 0


def test_shared_file_names_resolve_like_the_listing(datasets_dir):
    """`train --dataset delaney-processed` (docs/training.md) names a shared file."""
    from gnnforge.data._molecules import _resolve, molecule_files

    files = molecule_files(datasets_dir)
    assert _resolve("delaney-processed") == files["delaney-processed"]
    with pytest.raises(FileNotFoundError, match="a shared molecule file name"):
        _resolve("no-such-molecules")
