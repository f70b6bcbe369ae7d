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


def _assert_every_rank_finished(results) -> None:
    """Every spawned rank returned a value, or the first failure's error (or exit) is named."""
    for result in results:
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out or died (exit {result.exitcode})"


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


@pytest.mark.parametrize("prefetch, async_exchange", [(0, True), (2, True), (2, False)])
def test_four_processes_on_parts_equal_one_process_on_the_graph(tmp_path, prefetch,
                                                                async_exchange):
    _write(tmp_path / "parts", method="metis")
    options = _options(tmp_path / "parts", tmp_path / "coop", prefetch=prefetch,
                       async_exchange=async_exchange)
    results = spawn(_train_partitioned, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    _assert_every_rank_finished(results)
    reference = _single_process_reference(tmp_path / "single")
    for result in results:
        _, params, report = result.value
        for name, value in reference.items():
            torch.testing.assert_close(params[name], value, rtol=1e-4, atol=1e-4)
        assert report.startswith(f"rank {result.rank}: feature_rows=")
        rows = int(report.split("feature_rows=")[1].split(" of ")[0])
        assert rows < 2000 * 0.4 and "exchanged_mib=" in report


def test_input_dropout_applies_to_the_exchanged_rows_on_every_rank(tmp_path):
    # The exchanged feature rows are dense, so the first layer's input dropout draws a
    # mask per row on each rank; the summed gradients keep the ranks' models equal, and
    # the dropped inputs move them away from the dropout-free single process.
    _write(tmp_path / "parts", method="metis")
    options = _options(tmp_path / "parts", tmp_path / "coop", input_dropout=0.5)
    results = spawn(_train_partitioned, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    _assert_every_rank_finished(results)
    first = results[0].value[1]
    for result in results[1:]:
        for name, value in first.items():
            torch.testing.assert_close(result.value[1][name], value, rtol=1e-6, atol=1e-6)
    assert all(bool(torch.isfinite(value).all()) for value in first.values())
    reference = _single_process_reference(tmp_path / "single")
    gaps = [float((first[name] - value).abs().max()) for name, value in reference.items()]
    assert max(gaps) > 1e-3  # the first layer's inputs were dropped


def _remote(rank, world_size, directory, sampler_name):
    from gnnforge.distributed import fetch_rows, sample_remote
    from gnnforge.sampling import DependentKeys, LaborSampler, NeighborSampler

    data = load_partition(directory, rank)
    sampler = NeighborSampler([4, 3]) if sampler_name == "ns" else LaborSampler([4, 3])
    keys = [DependentKeys(1, seed=5)[q] for q in range(world_size)]
    generator = torch.Generator().manual_seed(rank)
    seeds = torch.randperm(data.num_nodes, generator=generator)[:40 if rank != 3 else 0]
    blocks = sample_remote(sampler, data.in_edges, data.owner, seeds, keys)
    x = fetch_rows(blocks[0].src_nodes, data.owner,
                   lambda ids: data.features[data.local(ids.numpy())], 16)
    return seeds, [(b.src_nodes, b.rowptr, b.col, b.edge_ids) for b in blocks], x


@pytest.mark.parametrize("sampler_name", ["ns", "labor"])
def test_owners_sample_and_serve_exactly_what_the_whole_graph_gives(tmp_path, sampler_name):
    from gnnforge.sampling import DependentKeys, LaborSampler, NeighborSampler

    graph, features, _, _, _ = _write(tmp_path / "parts")
    results = spawn(_remote, 4, args=(tmp_path / "parts", sampler_name),
                    timeout_s=SPAWN_TIMEOUT_S, collective_timeout_s=120)
    sampler = NeighborSampler([4, 3]) if sampler_name == "ns" else LaborSampler([4, 3])
    for result in results:  # rank 3 asked for nothing and still served the others
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out or died (exit {result.exitcode})"
        seeds, blocks, x = result.value
        expected = sampler.sample(graph, seeds, key=DependentKeys(1, seed=5)[result.rank])
        for got, block in zip(blocks, expected):
            for a, b in zip(got, (block.src_nodes, block.rowptr, block.col, block.edge_ids)):
                assert torch.equal(a, b)
        assert torch.equal(x, features[expected[0].src_nodes])


def _independent(rank, world_size, options):
    summary, params, _ = _train_partitioned(rank, world_size, options)
    return summary["best val_accuracy"], params


def test_independent_processes_train_in_lock_step(tmp_path):
    _write(tmp_path / "parts")
    options = _options(tmp_path / "parts", tmp_path / "ind", distributed="independent")
    results = spawn(_independent, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    _assert_every_rank_finished(results)
    assert len({r.value[0] for r in results}) == 1  # evaluated together: one number
    first = results[0].value[1]
    for result in results[1:]:  # gradients summed: every process applied the same update
        for name, value in first.items():
            assert torch.equal(result.value[1][name], value), name


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


def _local_groups(rank, world_size):
    from gnnforge.distributed import all_to_all_ids, cooperation_groups

    coop = cooperation_groups("local", local_world_size=2, sampling_group=True)
    got = all_to_all_ids([torch.tensor([rank, q]) for q in range(coop.size)], group=coop.group)
    return coop.index, coop.count, coop.rank, coop.size, [t.tolist() for t in got]


def test_local_cooperation_groups_stay_inside_a_node():
    results = spawn(_local_groups, 4, timeout_s=SPAWN_TIMEOUT_S, collective_timeout_s=60)
    _assert_every_rank_finished(results)
    for result in results:
        index, count, rank, size, got = result.value
        assert (index, count, rank, size) == (result.rank // 2, 2, result.rank % 2, 2)
        node = [2 * index, 2 * index + 1]  # only the node's two processes answered
        assert got == [[sender, rank] for sender in node]


def _train_on_two_nodes(rank, world_size, options):
    os.environ["LOCAL_WORLD_SIZE"] = "2"  # what torchrun sets: two "nodes" of two processes
    return _train_partitioned(rank, world_size, options)


def test_local_cooperation_trains_in_lock_step(tmp_path):
    _write(tmp_path / "parts", parts=2, method="metis")
    options = _options(tmp_path / "parts", tmp_path / "local", cooperate="local", epochs=1)
    results = spawn(_train_on_two_nodes, 4, args=(options,), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=120)
    _assert_every_rank_finished(results)
    first = results[0].value[1]
    for result in results[1:]:  # the two nodes trained on different batches, one update
        for name, value in first.items():
            assert torch.equal(result.value[1][name], value), name
