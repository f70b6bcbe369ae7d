"""Partitioned datasets: files validated on load; 4 gloo processes over a partitioned
dataset train exactly what one process trains on the whole graph; a killed rank ends the
others with a clear error."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from gnnforge.distributed import (PartitionError, balance, edge_cut, load_partition,
                                  partition_nodes, spawn, write_partitions)
from gnnforge.distributed._partition import vertex_weights
from gnnforge.train import NodeTask, fit, load_config
from gnnforge.train._checkpoint import load_checkpoint
from gnnforge.train._partition_source import load_node_data

pytestmark = pytest.mark.distributed

# Slow, shared machine: process start and numba's cache load take seconds per process.
SPAWN_TIMEOUT_S = 300


def _write(directory, parts=4, method="random", seed=0):
    graph, features, labels, masks = load_node_data("sbm", 0, 16, 4, 0.1)
    owner = partition_nodes(graph, parts, method, seed=seed, train_mask=masks["train"])
    write_partitions(directory, graph, owner, features, labels, masks, method=method,
                     seed=seed, balance=balance(owner, vertex_weights(graph, masks["train"]),
                                                parts),
                     edge_cut=edge_cut(graph, owner))
    return graph, features, labels, masks, owner


def test_parts_hold_exactly_their_vertices_and_in_edges(tmp_path):
    graph, features, labels, masks, owner = _write(tmp_path / "p")
    rowptr, col, eids = (t.numpy() for t in graph.csr(torch.int64))
    seen = []
    for part in range(4):
        data = load_partition(tmp_path / "p", part)
        nodes = data.nodes
        assert np.array_equal(nodes, np.flatnonzero(owner.numpy() == part))
        seen.append(nodes)
        assert torch.equal(data.features, features[torch.from_numpy(nodes)])
        assert torch.equal(data.labels, labels[torch.from_numpy(nodes)])
        edges = data.in_edges
        for i, v in enumerate(nodes[:50]):  # rows keep the whole graph's CSR order
            assert np.array_equal(edges.col[edges.rowptr[i]:edges.rowptr[i + 1]],
                                  col[rowptr[v]:rowptr[v + 1]])
            assert np.array_equal(edges.eids[edges.rowptr[i]:edges.rowptr[i + 1]],
                                  eids[rowptr[v]:rowptr[v + 1]])
        for split in ("train", "val", "test"):
            expected = nodes[masks[split].numpy()[nodes]]
            assert np.array_equal(data.splits[split].numpy(), expected)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(graph.num_nodes))


def test_partitioning_is_deterministic_for_a_seed(tmp_path):
    _write(tmp_path / "a", method="metis", seed=3)
    _write(tmp_path / "b", method="metis", seed=3)
    files = lambda d: json.loads((d / "manifest.json").read_text())["files"]  # noqa: E731
    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_damaged_files_are_named(tmp_path):
    _write(tmp_path / "p")
    root = tmp_path / "p"
    with pytest.raises(PartitionError, match="part 4 requested"):
        load_partition(root, 4)
    features = root / "part1" / "features.npy"
    raw = bytearray(features.read_bytes())
    raw[-1] ^= 0xFF
    features.write_bytes(bytes(raw))
    with pytest.raises(PartitionError, match=r"part1/features.npy: checksum mismatch"):
        load_partition(root, 1)
    load_partition(root, 0)  # the other parts still load
    col = root / "part0" / "col.npy"
    np.save(col, np.full(np.load(col).shape, 10**6, dtype=np.load(col).dtype))
    with pytest.raises(PartitionError, match=r"part0/col.npy: source ids must lie in"):
        load_partition(root, 0, verify=False)
    (root / "part2" / "labels.npy").unlink()
    with pytest.raises(PartitionError, match=r"part2/labels.npy: no such file"):
        load_partition(root, 2)
    (root / "manifest.json").write_text("{")
    with pytest.raises(PartitionError, match="manifest.json: not valid JSON"):
        load_partition(root, 0)


def _options(directory, out_dir, **extra):
    base = dict(task="node", mode="sampled", fanouts=[5, 5], batch_size=64, epochs=2,
                hidden=16, layers=2, lr=0.01, dropout=0.0, progress=False,
                out_dir=str(out_dir))
    if directory is not None:
        base.update(partitioned=str(directory), distributed="cooperative")
    base.update(extra)
    return base


def _train_partitioned(rank, world_size, options):
    from gnnforge.train._partitioned import PartitionedNodeTask

    config = load_config(options)
    task = PartitionedNodeTask(config)
    models = []
    build = task.build_model
    task.build_model = lambda: models.append(build()) or models[-1]
    summary = fit(config, task, printer=lambda *_: None)
    return summary, {k: v.clone() for k, v in models[0].state_dict().items()}, \
        task.rank_report()


def _single_process_reference(out_dir):
    config = load_config(dict(_options(None, out_dir), dataset="sbm", dependent=1))
    fit(config, NodeTask(config), printer=lambda *_: None)
    return load_checkpoint(out_dir / "checkpoint.pt")["model"]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_four_processes_on_parts_equal_one_process_on_the_graph(tmp_path, prefetch):
    _write(tmp_path / "parts", method="metis")
    options = _options(tmp_path / "parts", tmp_path / "coop", prefetch=prefetch)
    results = spawn(_train_partitioned, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    for result in results:
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out or died (exit {result.exitcode})"
    reference = _single_process_reference(tmp_path / "single")
    for result in results:
        _, params, report = result.value
        for name, value in reference.items():
            torch.testing.assert_close(params[name], value, rtol=1e-4, atol=1e-4)
        assert report.startswith(f"rank {result.rank}: feature_rows=")
        rows = int(report.split("feature_rows=")[1].split(" of ")[0])
        assert rows < 2000 * 0.4 and "exchanged_mib=" in report


def _independent(rank, world_size, options):
    return _train_partitioned(rank, world_size, options)[0]["best val_accuracy"]


def test_independent_processes_fetch_from_owners(tmp_path):
    _write(tmp_path / "parts")
    options = _options(tmp_path / "parts", tmp_path / "ind", distributed="independent",
                       epochs=3)
    results = spawn(_independent, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    for result in results:
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out or died (exit {result.exitcode})"
    accuracies = {r.value for r in results}
    assert len(accuracies) == 1  # evaluated together: one number for every process
    assert accuracies.pop() > 0.5  # the SBM's communities are learnable (chance: 0.25)


def _killed(rank, world_size, options):
    from gnnforge.train._partitioned import PartitionedNodeTask

    config = load_config(options)
    task = PartitionedNodeTask(config)
    batch = task.batch
    calls = [0]

    def dying_batch(index):
        calls[0] += 1
        if rank == 2 and calls[0] == 3:
            os._exit(7)  # like a killed process: no goodbye to the others
        return batch(index)

    task.batch = dying_batch
    import time

    start = time.monotonic()
    try:
        fit(config, task, printer=lambda *_: None)
    except Exception as error:  # noqa: BLE001 - the message is what the test checks
        return f"{type(error).__name__}: {error}", time.monotonic() - start
    return "no error", time.monotonic() - start


def test_killing_a_rank_ends_the_others_with_a_clear_error(tmp_path):
    _write(tmp_path / "parts")
    options = _options(tmp_path / "parts", tmp_path / "killed", epochs=5)
    results = spawn(_killed, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=20)
    assert results[2].exitcode == 7
    for result in results:
        if result.rank == 2:
            continue
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out (exit {result.exitcode})"
        message, _ = result.value
        assert "PeerError" in message and "a peer process died" in message, message
