"""Profiling: time every primitive on many graphs and widths, then fit the cost models.

What `gnnforge plan profile` runs. Each call is timed as the executor issues it (same
`gnnforge.ops` function, same `[rows, heads, cols]` layout), forward only for inference
and forward + backward for training, as the median of `repeats` runs after a warm-up.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from gnnforge import ops
from gnnforge._compat import require
from gnnforge.graph import Graph
from gnnforge.plan._cost import CostModel, call_width, design_row, work
from gnnforge.plan._features import graph_features
from gnnforge.plan._primitives import PRIMITIVES
from gnnforge.plan._suite import SuiteGraph

__all__ = ["ProfileConfig", "collect", "fit", "held_out_errors", "limit_threads", "time_call"]


def limit_threads(threads: int) -> None:
    """Run torch (and numba, when the kernels use it) on `threads` threads.

    Profiles and benchmarks pin this: on a shared 2-core machine a second thread mostly
    measures contention, and a cost model is only valid for the thread count it saw.
    """
    try:
        import numba

        # first: starting numba's OpenMP pool resets the process's OpenMP thread count,
        # which moved torch from 1 back to 2 threads after a fingerprint() had run
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass
    torch.set_num_threads(threads)


@dataclass(frozen=True)
class ProfileConfig:
    """The profiling grid; every cap exists to keep a run within ~15 minutes on 2 cores."""

    widths: tuple[int, ...] = (32, 128, 512, 2048)
    # (E + N) x width per sparse call: beyond this a call takes > ~0.1 s on one thread
    # here, and the models predict a throughput that has long saturated by then.
    max_sparse_work: float = 8e7
    max_gemm_work: float = 5e9  # m k n per GEMM, for the same reason
    heads: tuple[int, ...] = (1, 4)
    repeats: int = 3
    modes: tuple[bool, ...] = (False, True)  # inference, training


def time_call(run: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _runner(forward: Callable[[], torch.Tensor], training: bool) -> Callable[[], object]:
    if not training:
        def infer():
            with torch.no_grad():
                return forward()
        return infer

    def train():
        out = forward()
        if out.requires_grad:  # GCN's edge normalisation has no gradient to compute
            out.backward(torch.ones_like(out))
    return train


def _calls(graph: Graph, width: int, config: ProfileConfig, training: bool):
    """(primitive, sizes, forward) for one graph and width."""
    n, e = graph.num_nodes, graph.num_edges
    g = torch.Generator().manual_seed(width)
    grad = training

    def rand(*shape, requires_grad=grad):
        return torch.randn(*shape, generator=g).requires_grad_(requires_grad)

    x = rand(n, 1, width)
    weights = rand(e, 1, requires_grad=False).abs()
    scale = rand(n, requires_grad=False).abs().reshape(-1, 1, 1)
    yield "spmm_u", dict(f=width), lambda: ops.copy_u_sum(graph, x)
    yield "spmm_w", dict(f=width), lambda: ops.u_mul_e_sum(graph, x, weights)
    for heads in config.heads:
        if width % heads == 0:
            xh, alpha = rand(n, heads, width // heads), rand(e, heads, 1)
            yield ("spmm_att", dict(f=width, heads=heads),
                   lambda xh=xh, alpha=alpha: ops.u_mul_e_sum(graph, xh, alpha))
    y = rand(n, 1, width)
    yield "sddmm", dict(f=width), lambda: ops.gsddmm(graph, "add", x, y, "u", "v")
    yield "rowbcast", dict(rows=n, f=width), lambda: x * scale
    yield "elementwise", dict(count=n * width), lambda: x + y
    edge_values = rand(e, 1, width)
    yield "elementwise", dict(count=e * width), lambda: edge_values + edge_values
    for cols in config.widths:
        if n * width * cols <= config.max_gemm_work:
            left, right = rand(n, width), rand(width, cols)
            yield ("gemm", dict(m=n, k=width, n=cols, batch=1),
                   lambda left=left, right=right: left @ right)


def _graph_calls(graph: Graph, config: ProfileConfig, training: bool):
    n, e = graph.num_nodes, graph.num_edges
    g = torch.Generator().manual_seed(7)
    for heads in config.heads:
        logits = torch.randn(e, heads, 1, generator=g).requires_grad_(training)
        yield ("edge_softmax", dict(heads=heads),
               lambda logits=logits: ops.edge_softmax(graph, logits))
        left = torch.randn(n, heads, 1, generator=g).requires_grad_(training)
        right = torch.randn(n, heads, 1, generator=g).requires_grad_(training)
        yield ("sddmm", dict(f=heads),
               lambda left=left, right=right: ops.gsddmm(graph, "add", left, right, "u", "v"))
    degree = torch.rand(n, 1, generator=g)
    yield "sddmm", dict(f=1), lambda: ops.gsddmm(graph, "mul", degree, degree, "u", "v")


def collect(graphs: Iterable[SuiteGraph], config: ProfileConfig = ProfileConfig(),
            progress: bool = True) -> list[dict]:
    """Time every primitive on every graph (with one self-loop per node, as layers see it).

    Returns:
        One record per call: graph, family, primitive, training, sizes, features, seconds
        and the fingerprint of the process that timed it, read after the last timing: the
        kernel calibration chooses a class's variant on its first call here and keeps it,
        so only then does the fingerprint name every variant the timings ran (read before,
        on a fresh kernel record, it named none, and the models recorded no kernel choices).
    """
    from gnnforge.plan._fingerprint import fingerprint

    records = []
    graphs = list(graphs)
    bar = tqdm(total=len(graphs) * len(config.modes), desc="profile", disable=not progress)
    for name, family, raw in graphs:
        graph = raw.remove_self_loops().add_self_loops()
        graph.csr(), graph.csc()
        features = graph_features(graph)
        widths = [w for w in config.widths
                  if (graph.num_edges + graph.num_nodes) * w <= config.max_sparse_work]
        widths = widths or [min(config.widths)]
        for training in config.modes:
            calls = list(_graph_calls(graph, config, training))
            for width in widths:
                calls.extend(_calls(graph, width, config, training))
            for primitive, sizes, forward in calls:
                seconds = time_call(_runner(forward, training), config.repeats)
                records.append(dict(graph=name, family=family, primitive=primitive,
                                    training=training, sizes=sizes, features=features,
                                    seconds=seconds))
            bar.update()
    bar.close()
    machine = fingerprint()  # recorded with every timing: chunks may be fitted elsewhere
    return [dict(record, fingerprint=machine) for record in records]


def _matrices(records: list[dict], name: str):
    rows, targets, works, graphs = [], [], [], []
    for r in records:
        if r["primitive"] != name:
            continue
        amount = work(name, r["sizes"], r["features"])
        rows.append(design_row(name, r["sizes"], r["features"], r["training"]))
        targets.append(np.log(r["seconds"] / amount))
        works.append(amount)
        graphs.append(r["graph"])
    return (np.asarray(rows, np.float32), np.asarray(targets), np.asarray(works),
            np.asarray(graphs))


def _train_booster(rows: np.ndarray, targets: np.ndarray):
    xgboost = require("xgboost", extra="tune")
    params = dict(max_depth=5, eta=0.1, subsample=0.9, min_child_weight=2, nthread=2,
                  objective="reg:squarederror", seed=0)
    return xgboost.train(params, xgboost.DMatrix(rows, label=targets), num_boost_round=250)


def fit(records: list[dict]) -> CostModel:
    """One xgboost ensemble per primitive, trained on all records."""
    models = {}
    for name in PRIMITIVES:
        rows, targets, _, _ = _matrices(records, name)
        if len(rows) == 0:
            raise ValueError(f"fit: no profile records for primitive {name!r}")
        booster = _train_booster(rows, targets)
        models[name] = json.loads(bytes(booster.save_raw(raw_format="json")))
    return CostModel(models)


def held_out_errors(records: list[dict], held_out: Iterable[str],
                    min_pairs: int = 6, model: CostModel | None = None) -> dict[str, dict]:
    """Train on all graphs but `held_out` (or take `model`, fitted on exactly those
    records: the profile fits it once for this and for the calibration), predict the
    held-out graphs' calls.

    Returns:
        Per primitive: number of held-out calls, median and mean absolute relative error
        of predicted seconds, the fraction within a factor of 1.5, the RMS of
        log(predicted / measured) (`log_rms`: the decision rule's error scale), and
        `correlation`: per primitive (itself included), the correlation of the two
        models' mean log errors on the same graph and mode: for another primitive over
        the (graph, mode, width) keys both were timed at; for itself between two
        different widths (at least `min_pairs` pairs, else left out: taken as 0). A
        graph slower than predicted for one SpMM is usually slower for the other
        (measured: 0.6-0.8 between the unweighted and the weighted SpMM at one width); one
        model's errors at two widths correlate less (-0.1 to 0.6).
    """
    held_out = set(held_out)
    out, by_key = {}, {}
    for name in PRIMITIVES:
        rows, targets, works, graphs = _matrices(records, name)
        test = np.isin(graphs, list(held_out))
        if not test.any() or test.all():
            continue
        if model is None:
            booster = _train_booster(rows[~test], targets[~test])
            predicted = np.exp(booster.inplace_predict(rows[test])) * works[test]
        else:
            predicted = model.predict(name, rows[test].tolist(), works[test])
        actual = np.exp(targets[test]) * works[test]
        relative = np.abs(predicted - actual) / actual
        ratio = np.maximum(predicted / actual, actual / predicted)
        out[name] = dict(calls=int(test.sum()), median_rel_error=float(np.median(relative)),
                         mean_rel_error=float(np.mean(relative)),
                         within_1_5x=float(np.mean(ratio <= 1.5)),
                         log_rms=float(np.sqrt(np.mean(np.log(ratio) ** 2))))
        calls = [r for r in records if r["primitive"] == name and r["graph"] in held_out]
        errors = defaultdict(list)
        for r, error in zip(calls, np.log(predicted / actual)):
            errors[(r["graph"], r["training"],
                    call_width(name, r["sizes"], r["features"]))].append(float(error))
        by_key[name] = {key: float(np.mean(v)) for key, v in errors.items()}
    for name, errors in by_key.items():
        out[name]["correlation"] = {}
        for other, other_errors in by_key.items():
            if other == name:  # the same model at two widths of one graph and mode
                pairs = [(errors[a], errors[b]) for a in errors for b in errors
                         if a[:2] == b[:2] and a[2] < b[2]]
            else:
                pairs = [(errors[k], other_errors[k]) for k in errors if k in other_errors]
            value = _correlation(pairs, min_pairs)
            if value is not None:
                out[name]["correlation"][other] = value
    return out


def _correlation(pairs: list[tuple[float, float]], min_pairs: int) -> float | None:
    if len(pairs) < min_pairs:
        return None
    a, b = np.asarray(pairs).T
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def per_graph_summary(records: list[dict]) -> dict[str, int]:
    counts = defaultdict(int)
    for r in records:
        counts[r["graph"]] += 1
    return dict(counts)
