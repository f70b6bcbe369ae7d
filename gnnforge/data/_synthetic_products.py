"""A seeded graph with ogbn-products' shape, streamed to disk as memory-mappable arrays.

ogbn-products (Hu et al., OGB 2020): 2,449,029 nodes, 61,859,140 undirected edges (both
directions stored: 123,718,280, mean degree 50.5), 100-dim features, 47 classes, split
196,615 / 39,323 / 2,213,091. `generate_products(spec, folder)` writes a graph of that
shape for any node count, proportionally scaled:

- Degrees: Chung-Lu (Chung & Lu 2002). Vertex of degree rank r gets weight
  (r + r0)^-0.7 (a power-law tail of exponent 1 + 1/0.7 = 2.43; at the default size the
  largest expected degree is about 18,800 and the median about 26, close to the real
  graph's); ranks are assigned to ids by a seeded permutation, so hubs are spread over
  the ids, not at the low ones (the `rmat` generator keeps them there).
- Classes: 47, with probabilities proportional to 1 / (k + 1) (skewed, as the real
  classes are). Homophily: an edge's second end is drawn, with probability 0.8, among
  the first end's class (by weight), else among all vertices (by weight).
- Features: x_i = 0.15 * mu[c_i] + N(0, I), mu[k] ~ N(0, I) per class: a node alone is
  a weak witness of its class, its neighbourhood's mean a strong one, so a GNN beats an
  MLP on it.
- Labels: y_i = c_i, except for 20% of the nodes (seeded), whose label is redrawn from
  the class distribution, independently of the graph and the features. Without that
  noise the neighbourhood mean gave sampled GraphSAGE 99.5% validation accuracy within
  200 steps; with it no model can pass about 80.4% (0.8 + 0.2 / 47 when the class is
  found), near what GNNs reach on the real ogbn-products (about 78-82%).
- Split: a seeded permutation cut into the real split's proportions.

The pairs are drawn in chunks (never all at once), self-loops dropped, spilled to a
temporary file as int32, then scattered into the CSR (both directions) by a compiled
loop; each row is sorted and its repeated entries (Chung-Lu draws a hub's pairs more than
once) are removed. Peak memory is about the CSR's `col` (4 bytes per directed edge) plus
one chunk. Self-loops and duplicates removed are counted in the meta.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

from gnnforge.data._progress import progress_bar

__all__ = ["GENERATOR_VERSION", "PRODUCTS_NODES", "ProductsSpec", "generate_products",
           "split_sizes"]

# Part of the meta: bump it whenever the arrays a spec produces change (2: label noise).
GENERATOR_VERSION = 2
PRODUCTS_NODES = 2_449_029
PRODUCTS_UNDIRECTED_EDGES = 61_859_140
PRODUCTS_SPLIT = (196_615, 39_323, 2_213_091)
# Draws per chunk: bounds the transient memory (about 60 bytes per draw) at any size.
CHUNK = 1 << 22
FEATURE_ROWS_PER_CHUNK = 1 << 16
_TMP_PAIRS = "pairs.tmp"
_REPEAT_ALLOWANCE = 1.024


@dataclass(frozen=True)
class ProductsSpec:
    """What a synthetic-products graph is made from; equal specs give equal arrays.

    Attributes:
        num_nodes: vertices (default: ogbn-products' 2,449,029).
        seed: every random draw derives from it.
        mean_degree: directed edges per vertex before self-loops and repeats are removed
            (ogbn-products: 2 * 61,859,140 / 2,449,029 = 50.52).
        num_features, num_classes: ogbn-products' 100 and 47.
        exponent: weight (r + r0)^-exponent of degree rank r (tail exponent 1 + 1/exponent).
        homophily: probability that an edge's second end is drawn from the first's class.
        signal: scale of the class mean in the features (noise has unit variance).
        label_noise: share of nodes whose label is redrawn, independent of everything.
    """

    num_nodes: int = PRODUCTS_NODES
    seed: int = 0
    mean_degree: float = 2 * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES
    num_features: int = 100
    num_classes: int = 47
    exponent: float = 0.7
    homophily: float = 0.8
    signal: float = 0.15
    label_noise: float = 0.2

    def __post_init__(self) -> None:
        for name in ("num_nodes", "seed", "num_features", "num_classes"):
            value = getattr(self, name)
            if not isinstance(value, int | np.integer) or isinstance(value, bool):
                raise TypeError(f"synthetic-products: {name} must be an int, got {value!r}")
        if not 1024 <= self.num_nodes < 2**31:
            raise ValueError(f"synthetic-products: num_nodes must lie in [1024, 2**31), got "
                             f"{self.num_nodes} (the scaling curves use 2**18..2**23)")
        if self.num_classes < 2 or self.num_features < 1 or self.seed < 0:
            raise ValueError(f"synthetic-products: need num_classes >= 2, num_features >= 1 "
                             f"and seed >= 0, got {self.num_classes}, {self.num_features}, "
                             f"{self.seed}")
        if not (0 < self.mean_degree < self.num_nodes and 0 < self.exponent < 1
                and 0 <= self.homophily <= 1 and self.signal >= 0
                and 0 <= self.label_noise <= 1):
            raise ValueError(f"synthetic-products: bad parameters {self.as_dict()}; need "
                             "0 < mean_degree < num_nodes, 0 < exponent < 1, "
                             "0 <= homophily, label_noise <= 1, signal >= 0")

    @property
    def num_pairs(self) -> int:
        """Undirected pairs drawn: the target plus the share that is drawn twice (2.4% of
        the directed edges were repeats at 2**21 nodes), so the default size lands near
        ogbn-products' 123.7M directed edges once repeats are removed."""
        return round(self.num_nodes * self.mean_degree / 2 * _REPEAT_ALLOWANCE)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_sizes(num_nodes: int) -> tuple[int, int, int]:
    """(train, val, test) in ogbn-products' proportions; exact at its size."""
    train = round(num_nodes * PRODUCTS_SPLIT[0] / PRODUCTS_NODES)
    val = round(num_nodes * PRODUCTS_SPLIT[1] / PRODUCTS_NODES)
    return train, val, num_nodes - train - val


def _rng(spec: ProductsSpec, *stream: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, *stream])


def _weights_and_classes(spec: ProductsSpec) -> tuple[np.ndarray, np.ndarray]:
    """([N] float64 Chung-Lu weight of each id, [N] int16 class of each id)."""
    n = spec.num_nodes
    offset = 1.0 + n / 25_000  # r0: about 100 at ogbn-products' size, so hubs stay < N
    by_rank = (np.arange(n, dtype=np.float64) + offset) ** -spec.exponent
    weights = np.empty(n, dtype=np.float64)
    weights[_rng(spec, 1).permutation(n)] = by_rank  # rank r -> a random id
    share = 1.0 / np.arange(1, spec.num_classes + 1)
    labels = _rng(spec, 2).choice(spec.num_classes, size=n, p=share / share.sum())
    return weights, labels.astype(np.int16)


@dataclass(frozen=True)
class _Urn:
    """Weighted draws of ids, overall or within a class: ids grouped by class, with the
    cumulative weight in that order; class k's ids sit between cum `low[k]` and `high[k]`.

    A guide table (Chen & Asau 1974) maps [0, total) in N equal cells to the first
    position whose cumulative weight reaches the cell, so a draw reads about two entries
    of `cum` instead of a binary search's log2(N) cache misses (with binary search the
    generation took 145 s at 2**21 nodes; with the table 27 s at 2.45M).
    """

    order: np.ndarray   # [N] int32 ids sorted by class
    cum: np.ndarray     # [N] float64 cumulative weight along `order`
    guide: np.ndarray   # [N] int64 first position of each of N equal cells of the total
    low: np.ndarray     # [C] cumulative weight before class k
    high: np.ndarray    # [C]

    @classmethod
    def build(cls, weights: np.ndarray, labels: np.ndarray, num_classes: int) -> _Urn:
        order = np.argsort(labels, kind="stable").astype(np.int32)
        cum = np.cumsum(weights[order])
        edges = np.arange(cum.size, dtype=np.float64) * (cum[-1] / cum.size)
        guide = np.searchsorted(cum, edges, side="right")
        ends = np.cumsum(np.bincount(labels, minlength=num_classes))
        high = np.where(ends > 0, cum[np.maximum(ends - 1, 0)], 0.0)
        low = np.concatenate([[0.0], high[:-1]])
        return cls(order, cum, guide, low, high)

    def draw(self, low: np.ndarray | float, high: np.ndarray | float, uniform: np.ndarray):
        """Ids whose cumulative weight interval holds low + u * (high - low)."""
        targets = low + uniform * (high - low)
        return _guided_draw(self.cum, self.guide, self.order, targets)


@numba.njit(cache=True, nogil=True)
def _guided_draw(cum, guide, order, targets):
    """order[first i with cum[i] > t] for each target t (the guide table's cell, then a
    short forward scan)."""
    n = cum.shape[0]
    scale = n / cum[n - 1]
    out = np.empty(targets.shape[0], dtype=np.int32)
    for j in range(targets.shape[0]):
        t = targets[j]
        i = guide[min(int(t * scale), n - 1)]
        while i > 0 and cum[i - 1] > t:  # the cell rounded up: step back
            i -= 1
        while i < n - 1 and cum[i] <= t:
            i += 1
        out[j] = order[i]
    return out


def _draw_pairs(spec: ProductsSpec, urn: _Urn, classes: np.ndarray, chunk: int,
                size: int) -> tuple[np.ndarray, np.ndarray]:
    """One chunk of (u, v) int32 pairs, self-loops removed."""
    rng = _rng(spec, 3, chunk)
    u = urn.draw(0.0, urn.cum[-1], rng.random(size))
    same = rng.random(size) < spec.homophily
    v = urn.draw(0.0, urn.cum[-1], rng.random(size))
    cls = classes[u[same]]
    v[same] = urn.draw(urn.low[cls], urn.high[cls], rng.random(int(same.sum())))
    keep = u != v
    return u[keep], v[keep]


@numba.njit(cache=True, nogil=True)
def _scatter(u, v, cursor, col):
    """Both directions of each pair into the CSR by destination: row v gets u, row u v."""
    for i in range(u.shape[0]):
        col[cursor[v[i]]] = u[i]
        cursor[v[i]] += 1
        col[cursor[u[i]]] = v[i]
        cursor[u[i]] += 1


@numba.njit(cache=True, nogil=True)
def _sort_dedup_rows(rowptr, col, first, stop, out, new_rowptr):
    """Rows [first, stop): sort, drop repeats, compact to col[out:]; returns the new end.

    In place: the compacted rows never overtake the rows still to be read (out <= start),
    and each row is copied (sorted) before it is written.
    """
    for row in range(first, stop):
        values = np.sort(col[rowptr[row]:rowptr[row + 1]])
        for j in range(values.shape[0]):
            if j == 0 or values[j] != values[j - 1]:
                col[out] = values[j]
                out += 1
        new_rowptr[row + 1] = out
    return out


class _NpyWriter:
    """A .npy file written chunk by chunk (no memory map, so no resident dirty pages)."""

    def __init__(self, path: Path, dtype: Any, shape: tuple[int, ...]) -> None:
        self.handle = open(path, "wb")
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                  "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_2_0(self.handle, header)
        self.dtype = np.dtype(dtype)

    def write(self, values: np.ndarray) -> None:
        self.handle.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())

    def close(self) -> None:
        self.handle.close()


def _save(path: Path, values: np.ndarray) -> None:
    writer = _NpyWriter(path, values.dtype, values.shape)
    writer.write(values)
    writer.close()


def generate_products(spec: ProductsSpec, folder: Path, progress: bool | None = None
                      ) -> dict[str, Any]:
    """Write the graph of `spec` into the existing empty `folder`; returns the meta.

    Files: rowptr.npy ([N + 1] int32, or int64 past 2**31 edges), col.npy ([E] int32 source
    of each in-edge, rows sorted), x.npy ([N, F] float32), y.npy ([N] int16),
    train.npy / val.npy / test.npy (sorted int64 ids) and meta.json (written last).
    """
    start = time.perf_counter()
    weights, classes = _weights_and_classes(spec)
    urn = _Urn.build(weights, classes, spec.num_classes)
    del weights
    chunks = [min(CHUNK, spec.num_pairs - at) for at in range(0, spec.num_pairs, CHUNK)]
    feature_chunks = -(-spec.num_nodes // FEATURE_ROWS_PER_CHUNK)
    row_chunks = -(-spec.num_nodes // (1 << 16))
    bar = progress_bar(total=2 * len(chunks) + row_chunks + feature_chunks,
                       desc=f"synthetic-products {spec.num_nodes:,} nodes", progress=progress)
    degree, pairs = _spill_pairs(spec, urn, classes, chunks, folder / _TMP_PAIRS, bar)
    del urn
    col, rowptr, duplicates = _build_csr(degree, folder / _TMP_PAIRS, bar)
    (folder / _TMP_PAIRS).unlink()
    index = np.int32 if col.size < 2**31 else np.int64
    _save(folder / "rowptr.npy", rowptr.astype(index))
    _save(folder / "col.npy", col)
    in_degree = np.diff(rowptr)
    del col, rowptr
    _write_features(spec, classes, folder / "x.npy", bar)
    _save(folder / "y.npy", _noisy_labels(spec, classes))
    split = dict(zip(("train", "val", "test"), _split(spec)))
    for name, ids in split.items():
        _save(folder / f"{name}.npy", ids)
    bar.close()
    meta = {"generator": "synthetic-products", "version": GENERATOR_VERSION,
            "spec": spec.as_dict(), "num_nodes": spec.num_nodes,
            "num_edges": int(in_degree.sum()), "pairs_drawn": spec.num_pairs,
            "self_loops_removed": 2 * (spec.num_pairs - pairs),
            "duplicates_removed": duplicates,
            "split": {name: int(ids.size) for name, ids in split.items()},
            "stats": _degree_stats(in_degree), "seconds": time.perf_counter() - start,
            "bytes": {path.name: path.stat().st_size for path in sorted(folder.iterdir())}}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def _spill_pairs(spec: ProductsSpec, urn: _Urn, classes: np.ndarray, chunks: list[int],
                 path: Path, bar: Any) -> tuple[np.ndarray, int]:
    """Draw every chunk, append its pairs to `path` (int32 u then v per chunk); returns
    ([N] int64 degree counting both directions, pairs kept)."""
    degree = np.zeros(spec.num_nodes, dtype=np.int64)
    kept = 0
    with open(path, "wb") as handle:
        for index, size in enumerate(chunks):
            bar.set_postfix_str("drawing edges")
            u, v = _draw_pairs(spec, urn, classes, index, size)
            degree += np.bincount(u, minlength=spec.num_nodes)
            degree += np.bincount(v, minlength=spec.num_nodes)
            np.array([u.size], dtype=np.int64).tofile(handle)
            u.tofile(handle)
            v.tofile(handle)
            kept += u.size
            bar.update(1)
    return degree, kept


def _build_csr(degree: np.ndarray, path: Path, bar: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """(col [E] int32, rowptr [N + 1] int64, directed duplicates removed) from the spill."""
    n = degree.size
    rowptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=rowptr[1:])
    col = np.empty(int(rowptr[-1]), dtype=np.int32)
    cursor = rowptr[:-1].copy()
    with open(path, "rb") as handle:
        while True:
            head = np.fromfile(handle, dtype=np.int64, count=1)
            if head.size == 0:
                break
            u = np.fromfile(handle, dtype=np.int32, count=int(head[0]))
            v = np.fromfile(handle, dtype=np.int32, count=int(head[0]))
            bar.set_postfix_str("building the CSR")
            _scatter(u, v, cursor, col)
            bar.update(1)
    del cursor
    new_rowptr = np.zeros(n + 1, dtype=np.int64)
    out = 0
    for first in range(0, n, 1 << 16):
        bar.set_postfix_str("sorting rows")
        out = _sort_dedup_rows(rowptr, col, first, min(first + (1 << 16), n), out, new_rowptr)
        bar.update(1)
    # A view: the caller writes it out and drops it (a copy would double the peak).
    return col[:out], new_rowptr, col.size - out


def _write_features(spec: ProductsSpec, classes: np.ndarray, path: Path, bar: Any) -> None:
    means = _rng(spec, 4).standard_normal((spec.num_classes, spec.num_features),
                                          dtype=np.float32) * np.float32(spec.signal)
    writer = _NpyWriter(path, np.float32, (spec.num_nodes, spec.num_features))
    for index, first in enumerate(range(0, spec.num_nodes, FEATURE_ROWS_PER_CHUNK)):
        bar.set_postfix_str("features")
        rows = classes[first:first + FEATURE_ROWS_PER_CHUNK]
        noise = _rng(spec, 5, index).standard_normal((rows.size, spec.num_features),
                                                     dtype=np.float32)
        writer.write(noise + means[rows])                              # [rows, F]
        bar.update(1)
    writer.close()


def _noisy_labels(spec: ProductsSpec, classes: np.ndarray) -> np.ndarray:
    """[N] int16: the class, or for `label_noise` of the nodes a fresh draw from the
    class distribution."""
    rng = _rng(spec, 7)
    redrawn = rng.random(classes.size) < spec.label_noise
    share = 1.0 / np.arange(1, spec.num_classes + 1)
    labels = classes.copy()
    labels[redrawn] = rng.choice(spec.num_classes, size=int(redrawn.sum()),
                                 p=share / share.sum())
    return labels


def _split(spec: ProductsSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    train, val, _ = split_sizes(spec.num_nodes)
    order = _rng(spec, 6).permutation(spec.num_nodes)
    return (np.sort(order[:train]), np.sort(order[train:train + val]),
            np.sort(order[train + val:]))


def _degree_stats(degree: np.ndarray) -> dict[str, float]:
    """In-degree summary (also the out-degree: the graph is symmetric)."""
    return {"min": int(degree.min()), "mean": float(degree.mean()),
            "median": float(np.median(degree)), "max": int(degree.max()),
            "isolated_nodes": int((degree == 0).sum())}
