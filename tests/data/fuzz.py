"""Mutation fuzzing of every file reader, seeded with cut-down copies of the real datasets.

Run as `python -m tests.data.fuzz TARGET SECONDS SEED OUT_DIR` (the test does, in a child
process, so that a segfault or a hang fails one test instead of killing the run). For
`SECONDS` the driver mutates the target's seed files (bit flips, byte edits, cut and
duplicated chunks, truncation, numeric tokens swapped for extreme values, ragged rows;
inside gzip and zip containers, and inside npy arrays and pickles) and reads each mutant.
Every read must end in the reader's documented error type or in a graph that passes the
`Graph` constructor's full validation. Before each read the input is written to
OUT_DIR/current/ (so a crash leaves its reproducer behind); an unexpected exception is
printed with its traceback and the driver exits 1.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import random
import shutil
import sys
import time
import traceback
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnnforge.data import DataFormatError, shared_datasets_dir
from gnnforge.graph import Graph

INTERESTING = [b"-1", b"0", b"1", b"2147483647", b"2147483648", b"-2147483649", b"4294967296",
               b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809",
               b"99999999999999999999", b"1e308", b"-1e308", b"nan", b"inf", b"1.5", b"0x10",
               b"", b"7 7", b"\x00", b"\xff\xfe", b"1e-400", b"100000", b"65537"]
INTERESTING_INTS = [-1, 0, 1, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63), 10**6, 3]


# ----------------------------------------------------------------------------- mutations


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One to three byte-level or token-level edits of `data`."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(9)
        position = rng.randrange(len(out) + 1)
        if choice == 0 and out:                                 # flip bits
            out[min(position, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1 and out:                               # one odd byte
            out[min(position, len(out) - 1)] = rng.choice(b"\x00\xff-9\n ,.%#")
        elif choice == 2:                                       # cut a chunk
            del out[position:position + rng.randint(1, 64)]
        elif choice == 3:                                       # duplicate a chunk
            out[position:position] = out[position:position + rng.randint(1, 64)]
        elif choice == 4:                                       # truncate
            del out[position:]
        elif choice in (5, 6):                                  # swap a number for an extreme
            out = bytearray(_swap_number(bytes(out), rng))
        elif choice == 7:                                       # ragged: a token more or less
            out = bytearray(_ragged(bytes(out), rng))
        else:                                                   # a line moved
            lines = bytes(out).split(b"\n")
            if len(lines) > 2:
                line = lines.pop(rng.randrange(len(lines)))
                lines.insert(rng.randrange(len(lines)), line)
            out = bytearray(b"\n".join(lines))
    return bytes(out)


def _swap_number(data: bytes, rng: random.Random) -> bytes:
    import re

    numbers = list(re.finditer(rb"-?\d+(\.\d+)?", data[:200_000]))
    if not numbers:
        return data
    match = rng.choice(numbers)
    return data[:match.start()] + rng.choice(INTERESTING) + data[match.end():]


def _ragged(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    index = rng.randrange(len(lines))
    if rng.random() < 0.5:
        lines[index] += b" " + rng.choice(INTERESTING[:8])
    else:
        lines[index] = b" ".join(lines[index].split()[:-1])
    return b"\n".join(lines)


def mutate_text_file(data: bytes, rng: random.Random) -> bytes:
    """Edit plain or gzip text; gzip is mostly edited inside, sometimes as raw bytes."""
    if data[:2] == b"\x1f\x8b" and rng.random() < 0.8:
        try:
            return gzip.compress(mutate_bytes(gzip.decompress(data), rng), mtime=0)
        except Exception:  # noqa: BLE001 - an earlier edit broke the gzip stream itself
            pass
    return mutate_bytes(data, rng)


def mutate_zip(data: bytes, rng: random.Random,
               member: Callable[[str, bytes, random.Random], bytes] | None = None) -> bytes:
    """Edit one member and rebuild the zip (mostly), or edit the zip's raw bytes."""
    try:
        if rng.random() < 0.25:
            raise zipfile.BadZipFile("edit the raw bytes")
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
    except Exception:  # noqa: BLE001 - an earlier edit broke the zip: edit its bytes
        return mutate_bytes(data, rng)
    name = rng.choice(sorted(members))
    edit = member or (lambda _, raw, r: mutate_bytes(raw, r))
    members[name] = edit(name, members[name], rng)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, raw in members.items():
            archive.writestr(key, raw)
    return out.getvalue()


def mutate_array(array: np.ndarray, rng: random.Random) -> np.ndarray:
    """A structural edit of an array: an extreme value, a narrower dtype, a cut or a reshape."""
    choice = rng.randrange(5)
    if array.dtype.kind in "iuf" and array.size and choice <= 1:
        array = array.copy()
        value = rng.choice(INTERESTING_INTS)
        if array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            value = min(max(value, info.min), info.max)
        array.flat[rng.randrange(array.size)] = value
        return array
    if choice == 2 and array.dtype.kind in "iu":
        return array.astype(rng.choice([np.int32, np.int8, np.uint64, np.float32]))
    if choice == 3 and array.size:
        return array.reshape(-1)[: rng.randrange(array.size)]
    if choice == 4 and array.size:
        return array.reshape(-1, 1) if array.ndim == 1 else array.reshape(-1)
    return array


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=array.dtype.hasobject)
    return out.getvalue()


def mutate_npy_member(name: str, raw: bytes, rng: random.Random) -> bytes:
    """Structured edits of plain arrays and of pickled scipy matrices; else raw bytes."""
    if rng.random() < 0.3:
        return mutate_bytes(raw, rng)
    try:  # our own seed member, possibly already edited
        array = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=True)
    except Exception:  # noqa: BLE001 - an earlier edit broke it: edit its bytes
        return mutate_bytes(raw, rng)
    if array.dtype.hasobject and array.shape == ():
        value = array.item()
        if hasattr(value, "indptr"):
            part = rng.choice(["indptr", "indices", "data"])
            setattr(value, part, mutate_array(getattr(value, part), rng))
        return _npy(np.array(value, dtype=object) if not isinstance(value, np.ndarray)
                    else value)
    return _npy(mutate_array(array, rng))


def mutate_pickle(raw: bytes, rng: random.Random) -> bytes:
    """Structured edits inside a Planetoid pickle (arrays, CSR parts, adjacency), or bytes."""
    if rng.random() < 0.3:
        return mutate_bytes(raw, rng)
    try:  # our own seed files (possibly already edited), not untrusted input
        value = pickle.loads(raw, encoding="latin1")
    except Exception:  # noqa: BLE001 - an earlier edit broke it: edit its bytes
        return mutate_bytes(raw, rng)
    if hasattr(value, "indptr"):
        part = rng.choice(["indptr", "indices", "data"])
        setattr(value, part, mutate_array(getattr(value, part), rng))
    elif isinstance(value, np.ndarray):
        value = mutate_array(value, rng)
    elif isinstance(value, dict) and value:
        key = rng.choice(list(value))
        value[key] = list(value[key]) + [rng.choice(INTERESTING_INTS)]
        if rng.random() < 0.3:
            value[rng.choice(INTERESTING_INTS)] = [0]
    return pickle.dumps(value, protocol=2)


# ----------------------------------------------------------------------------- targets


@dataclass
class Target:
    """Seed files (name -> bytes), a reader of a folder holding them, what may be raised.

    `read(folder, rng)` reads the case (rng picks reader options such as features=);
    `single`: each case holds one seed file (else all of them, one mutated).
    """

    seeds: Callable[[Path], dict[str, bytes]]
    read: Callable[[Path, random.Random], Any]
    mutate: Callable[[str, bytes, random.Random], bytes]
    single: bool = False
    errors: tuple[type[BaseException], ...] = (DataFormatError,)


def _gz_lines(path: Path, count: int) -> bytes:
    with gzip.open(path, "rb") as handle:
        return b"".join(handle.readline() for _ in range(count))


def _edge_seeds(root: Path) -> dict[str, bytes]:
    slashdot = _gz_lines(root / "snap_soc_slashdot0902" / "soc-Slashdot0902.txt.gz", 150)
    enron = _gz_lines(root / "snap_email_enron" / "email-Enron.txt.gz", 120)
    weighted = b"".join(line.rstrip(b"\n") + b" 0.5\n" for line in enron.splitlines(True)[1:])
    return {"slashdot.txt": slashdot, "slashdot.txt.gz": gzip.compress(slashdot, mtime=0),
            "enron.txt": enron, "weighted.txt": weighted}


def _mtx_seeds(root: Path) -> dict[str, bytes]:
    lines = _gz_lines(root / "suitesparse_luxembourg_osm" / "luxembourg_osm.mtx.gz", 2000)
    header = [line for line in lines.splitlines(True) if line.startswith(b"%")]
    entries = lines.splitlines(True)[len(header) + 1:]
    kept = [line for line in entries if max(map(int, line.split()[:2])) <= 300][:150]
    body = b"".join(header) + f"300 300 {len(kept)}\n".encode() + b"".join(kept)
    from gnnforge.data import read_matrix_market_array

    xy = read_matrix_market_array(root / "suitesparse_luxembourg_osm" /
                                  "luxembourg_osm_coord.mtx.gz")[:300]
    coords = ("%%MatrixMarket matrix array real general\n300 2\n"
              + "".join(f"{float(value)!r}\n" for value in xy.T.reshape(-1))).encode()
    return {"graph.mtx": body, "graph.mtx.gz": gzip.compress(body, mtime=0),
            "coord.mtx": coords}


def _read_mtx(folder: Path, rng: random.Random) -> Any:
    from gnnforge.data._roads import read_mtx_with_coordinates

    del rng
    coordinates = folder / "coord.mtx"
    return read_mtx_with_coordinates(next(folder.glob("graph.mtx*")),
                                     coordinates if coordinates.exists() else None)


def _ligra_seeds(root: Path) -> dict[str, bytes]:
    from gnnforge.data import read_ligra

    graph, _ = read_ligra(root / "snap_cit_hepth_ligra" / "cit-HepTh.txt.gz")
    keep = (graph.src < 80) & (graph.dst < 80)
    src, dst = graph.src[keep].numpy(), graph.dst[keep].numpy()
    offsets = np.searchsorted(src, np.arange(80))
    words = ["AdjacencyGraph", "80", str(src.size), *map(str, offsets), *map(str, dst)]
    weighted = ["WeightedAdjacencyGraph", "80", str(src.size), *map(str, offsets),
                *map(str, dst), *(["1"] * src.size)]
    return {"small.adj": "\n".join(words).encode() + b"\n",
            "weighted.adj": "\n".join(weighted).encode() + b"\n"}


def _musae_seeds(root: Path) -> dict[str, bytes]:
    folder = root / "musae_facebook"
    edges = [line for line in gzip.decompress((folder / "facebook_edges.csv.gz").read_bytes())
             .splitlines(True)]
    kept = [edges[0]] + [line for line in edges[1:]
                         if max(map(int, line.split(b","))) < 100]
    target = gzip.decompress((folder / "facebook_target.csv.gz").read_bytes()).splitlines(True)
    features = json.loads(gzip.decompress((folder / "facebook.json.gz").read_bytes()))
    return {"edges.csv": b"".join(kept), "target.csv": b"".join(target[:101]),
            "features.json": json.dumps({str(i): features[str(i)] for i in range(100)}).encode()}


def _read_musae(folder: Path, rng: random.Random) -> Any:
    from gnnforge.data import read_musae

    return read_musae(folder / "edges.csv", folder / "target.csv", folder / "features.json",
                      features=rng.choice(["ids", "dense"]))


def _tu_seeds(root: Path) -> dict[str, bytes]:
    return {"MUTAG.zip": (root / "tu_datasets" / "MUTAG.zip").read_bytes()}


def _npz_seeds(root: Path) -> dict[str, bytes]:
    return {"cora.npz": (root / "gnn_benchmark_npz" / "cora.npz").read_bytes(),
            "gallery.npz": _small_gallery(root / "graphgallery_npz" / "amazon_photo.npz")}


def _small_gallery(path: Path) -> bytes:
    """The first 300 nodes of a GraphGallery npz, written in the same pickled layout."""
    from gnnforge.data._npz import read_npz_members

    members = read_npz_members(path)
    adj = members["adj_matrix"][:300, :300].tocsr()
    attr = members["node_attr"][:300].tocsr()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, value in (("adj_matrix", adj), ("node_attr", attr),
                            ("node_label", np.asarray(members["node_label"])[:300])):
            array = value if isinstance(value, np.ndarray) else np.array(value, dtype=object)
            archive.writestr(f"{name}.npy", _npy(array))
    return out.getvalue()


def _read_npz(folder: Path, rng: random.Random) -> Any:
    from gnnforge.data import read_graph_npz

    return read_graph_npz(next(folder.glob("*.npz")), features=rng.choice(["dense", "none"]))


def _planetoid_seeds(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes()
            for path in sorted((root / "planetoid").glob("ind.cora.*"))}


def _mutate_planetoid(name: str, raw: bytes, rng: random.Random) -> bytes:
    return mutate_bytes(raw, rng) if name.endswith("test.index") else mutate_pickle(raw, rng)


def _mat_seeds(root: Path) -> dict[str, bytes]:
    import scipy.io

    problem = scipy.io.loadmat(root / "suitesparse_usroads48" / "usroads-48.mat")["Problem"]
    matrix = problem["A"][0, 0].tocsr()[:200, :200].tocsc()
    coord = problem["aux"][0, 0]["coord"][0, 0][:200]
    out = io.BytesIO()
    scipy.io.savemat(out, {"Problem": {"A": matrix, "aux": {"coord": coord}, "name": "cut"}})
    return {"roads.mat": out.getvalue()}


def _molecule_seeds(root: Path) -> dict[str, bytes]:
    csv_lines = _gz_lines(root / "moleculenet" / "delaney-processed.csv.gz", 40)
    smiles = _gz_lines(root / "zinc_jtnn_subset" / "valid.txt.gz", 40)
    return {"delaney.csv": csv_lines, "zinc.smi": smiles}


def _read_molecules(folder: Path, rng: random.Random) -> Any:
    from gnnforge.data import load_molecules

    del rng
    path = next(p for p in folder.iterdir() if p.suffix in (".csv", ".smi"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid SMILES are reported by a warning
        return load_molecules(path, use_cache=False, progress=False)


def _program_seeds(root: Path) -> dict[str, bytes]:
    del root
    import gnnforge.data._programs as programs

    source = Path(programs.__file__).read_bytes()
    return {"programs.py": source[:6000].rsplit(b"\ndef ", 1)[0] + b"\n"}


def _read_programs(folder: Path, rng: random.Random) -> Any:
    from gnnforge.data import program_graphs

    del rng
    return program_graphs(folder, use_cache=False, progress=False, min_count=1).graphs


def _single(reader: Callable[[Path], Any]) -> Callable[[Path, random.Random], Any]:
    def read(folder: Path, rng: random.Random) -> Any:
        del rng
        return reader(next(iter(sorted(folder.iterdir()))))
    return read


def _readers() -> dict[str, Target]:
    from gnnforge.data import (read_edge_list, read_ligra, read_mat_graph, read_planetoid,
                               read_tu_zip)

    text = lambda name, raw, rng: mutate_text_file(raw, rng)  # noqa: E731
    return {
        "edge_list": Target(_edge_seeds, _single(read_edge_list), text, single=True),
        "matrix_market": Target(_mtx_seeds, _read_mtx, text),
        "ligra": Target(_ligra_seeds, _single(read_ligra), text, single=True),
        "musae": Target(_musae_seeds, _read_musae, text),
        "tu": Target(_tu_seeds, _single(lambda p: read_tu_zip(p, progress=False)),
                     lambda name, raw, rng: mutate_zip(raw, rng), single=True),
        "npz": Target(_npz_seeds, _read_npz,
                      lambda name, raw, rng: mutate_zip(raw, rng, mutate_npy_member),
                      single=True),
        "planetoid": Target(_planetoid_seeds, lambda f, rng: read_planetoid(f, "cora"),
                            _mutate_planetoid),
        "mat": Target(_mat_seeds, _single(read_mat_graph),
                      lambda name, raw, rng: mutate_bytes(raw, rng), single=True),
        "molecules": Target(_molecule_seeds, _read_molecules, text, single=True,
                            errors=(ValueError,)),
        "programs": Target(_program_seeds, _read_programs, text, single=True, errors=()),
    }


TARGETS = ("edge_list", "matrix_market", "ligra", "musae", "tu", "npz", "planetoid", "mat",
           "molecules", "programs")


# ----------------------------------------------------------------------------- the oracle


def check_result(result: Any) -> int:
    """Validate every graph in a reader's result through the full constructor; count them."""
    graphs = _graphs_in(result)
    for graph in graphs:
        Graph(graph.src, graph.dst, graph.num_nodes, edge_type=graph.edge_type,
              node_data=dict(graph.node_data), edge_data=dict(graph.edge_data),
              graph_data=dict(graph.graph_data))
    return len(graphs)


def _graphs_in(result: Any) -> list[Graph]:
    if isinstance(result, Graph):
        return [result]
    if isinstance(result, tuple | list):
        return [g for item in result for g in _graphs_in(item)]
    return []


def _case_files(target: Target, seeds: dict[str, bytes], rng: random.Random,
                folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    names = sorted(seeds)
    chosen = [rng.choice(names)] if target.single else names
    victim = rng.choice(chosen)
    for name in chosen:
        data = seeds[name]
        for _ in range(rng.choice([1, 1, 1, 2, 3]) if name == victim else 0):
            data = target.mutate(name, data, rng)
        (folder / name).write_bytes(data)


def fuzz(name: str, seconds: float, seed: int, out_dir: Path) -> int:
    """Mutate and read for `seconds`; return the number of cases (exit 1 on a finding)."""
    root = shared_datasets_dir()
    target = _readers()[name]
    seeds = target.seeds(root)
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    cases = clean = graphs = 0
    while cases == 0 or time.monotonic() < deadline:
        folder = out_dir / "current"
        _case_files(target, seeds, rng, folder)
        cases += 1
        try:
            result = target.read(folder, rng)
        except target.errors as error:
            clean += 1
            if isinstance(error, DataFormatError) and not str(error):
                return _finding(name, folder, out_dir, "an empty error message")
            continue
        except Exception:  # anything else is a finding
            return _finding(name, folder, out_dir, traceback.format_exc())
        try:
            graphs += check_result(result)
        except Exception:
            return _finding(name, folder, out_dir, "an invalid graph:\n" + traceback.format_exc())
    print(f"FUZZ-OK {name}: {cases} cases, {clean} clean errors, {graphs} valid graphs")
    return 0


def _finding(name: str, folder: Path, out_dir: Path, what: str) -> int:
    keep = out_dir / "finding"
    if keep.exists():
        shutil.rmtree(keep)
    shutil.copytree(folder, keep)
    print(f"FUZZ-FINDING {name}: {what}\nreproducer kept in {keep}")
    return 1


if __name__ == "__main__":
    target_name, budget, seed_value, folder_name = sys.argv[1:5]
    sys.setrecursionlimit(10_000)
    sys.exit(1 if fuzz(target_name, float(budget), int(seed_value), Path(folder_name)) else 0)

