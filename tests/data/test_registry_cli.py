import gzip
import zipfile

import pytest

from gnnforge.cli import main
from gnnforge.data import Dataset, _registry, discover_datasets, list_datasets, load_dataset
from gnnforge.data import _cli as cli_module


@pytest.fixture()
def toy_root(tmp_path):
    """One small file per discoverable format."""
    root = tmp_path / "data"
    (root / "snap").mkdir(parents=True)
    (root / "snap" / "toy-edges.txt.gz").write_bytes(gzip.compress(b"# Nodes: 4\n0 1\n1 2\n2 2\n"))
    (root / "snap" / "ligra.txt").write_text("AdjacencyGraph\n2\n1\n0\n1\n1\n")
    (root / "snap" / "smiles.txt").write_text("CCO\nc1ccccc1\n")  # a molecule set, not edges
    (root / "mm").mkdir()
    (root / "mm" / "road.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n"
    )
    (root / "mm" / "road_coord.mtx").write_text(
        "%%MatrixMarket matrix array real general\n3 2\n1\n2\n3\n4\n5\n6\n"
    )
    with zipfile.ZipFile(root / "TOY.zip", "w") as archive:
        archive.writestr("TOY/TOY_A.txt", "1, 2\n2, 1\n3, 3\n")
        archive.writestr("TOY/TOY_graph_indicator.txt", "1\n1\n2\n")
        archive.writestr("TOY/TOY_graph_labels.txt", "0\n1\n")
    return root


def test_discovery_names_and_formats(toy_root):
    found = {s.name: s.fmt for s in discover_datasets(toy_root)}
    assert found == {"toy-edges": "edges", "ligra": "ligra", "road": "mtx", "toy": "tu",
                     "smiles": "smiles"}


def test_load_dataset_caches_and_reports(toy_root, monkeypatch):
    dataset = load_dataset("ROAD", toy_root, symmetrize=True, dedup=True)
    assert isinstance(dataset, Dataset) and dataset.graph.num_edges == 4
    assert dataset.graph.node_data["pos"].tolist() == [[1, 4], [2, 5], [3, 6]]
    assert dataset.meta["drops"]["duplicates_removed"] == 4 and dataset.stats["bandwidth"] == 1
    # the second load reads the cache: building again would fail
    monkeypatch.setattr(_registry, "graph_stats", lambda graph: 1 / 0)
    again = load_dataset("road", toy_root, symmetrize=True, dedup=True)
    assert again.graph == dataset.graph and again.meta == dataset.meta
    toy = load_dataset("toy", toy_root)
    assert len(toy) == 2 and toy.stats["num_graphs"] == 2 and toy.stats["self_loops"] == 1
    with pytest.raises(ValueError, match="holds 2 graphs"):
        toy.graph


def test_unknown_names_and_options(toy_root):
    with pytest.raises(KeyError, match="did you mean toy-edges"):
        load_dataset("toy-edge", toy_root)
    with pytest.raises(TypeError, match=r"does not take option\(s\) \['features'\]"):
        load_dataset("road", toy_root, features="dense")
    with pytest.raises(ValueError, match="self_loops must be one of"):
        load_dataset("road", toy_root, self_loops="nope")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        discover_datasets(toy_root / "missing")


def test_builtins_take_generator_options():
    dataset = load_dataset("grid", rows=3, cols=4, use_cache=False)
    assert dataset.graph.num_nodes == 12 and dataset.meta["options"]["rows"] == 3
    assert {s.name for s in list_datasets(None)} >= {
        "rmat",
        "grid",
        "sbm",
        "uniform",
        "molecule-like",
    }


def test_cli_lists_a_root_with_real_statistics(toy_root, capsys, monkeypatch):
    # Two small built-ins: the full set parses 5,000 molecules and 200 source files on a
    # cold cache (about 45 s on a busy machine) for rows this test does not read.
    monkeypatch.setattr(_registry, "builtin_sources", _small_builtins)
    assert main(["datasets", "--root", str(toy_root)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert lines["toy-edges"][1:5] == ["edges", "1", "4", "3"]
    assert lines["toy"][1:5] == ["tu", "2", "3", "3"]
    assert "Discovered under" in out


def test_cli_without_shared_folder(monkeypatch, capsys):
    monkeypatch.setattr(cli_module, "shared_datasets_dir", lambda: None)
    monkeypatch.setattr(_registry, "shared_datasets_dir", lambda: None)
    monkeypatch.setattr(_registry, "builtin_sources", _small_builtins)  # keep the test fast
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "No shared datasets folder was found" in out and "grid" in out


def _small_builtins():
    from gnnforge.data._sources import builtin_sources

    return [s for s in builtin_sources() if s.name in ("grid", "molecule-like")]


def test_cli_detail_and_errors(toy_root, capsys):
    assert main(["datasets", "toy", "--root", str(toy_root), "--remove-self-loops"]) == 0
    out = capsys.readouterr().out
    assert "self_loops_removed': 1" in out and "nodes per graph" in out
    assert main(["datasets", "nope", "--root", str(toy_root)]) == 2
    assert main(["datasets", "--root", str(toy_root / "missing")]) == 2


def test_shared_folder_is_discovered(datasets_dir):
    names = {s.name for s in list_datasets(datasets_dir)}
    assert {
        "cora",
        "cora-npz",
        "citeseer",
        "pubmed",
        "soc-slashdot0902",
        "email-enron",
        "soc-epinions1",
        "cit-hepth",
        "luxembourg_osm",
        "usroads-48",
        "rmat_s17_e21",
        "musae-facebook",
        "musae-git",
        "reddit10k",
        "nci1",
        "proteins",
        "mutag",
        "enzymes",
        "imdb-binary",
        "mutagenicity",
        "amazon_cs",
        "coauthor_phy",
    } <= names
    dataset = load_dataset("mutag", datasets_dir)
    assert dataset.stats["num_graphs"] == 188 and dataset.stats["undirected_edges"] == 3721


def test_cli_plot(toy_root, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "toy.png"
    assert main(["datasets", "toy", "--root", str(toy_root), "--plot", str(target)]) == 0
    assert target.stat().st_size > 1000
    out = capsys.readouterr().out
    assert "graphs with this many nodes" in out and f"wrote {target}" in out
