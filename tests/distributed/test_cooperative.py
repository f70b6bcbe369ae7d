"""Cooperative minibatching on 1 and 2 gloo processes, against one process on the same batch."""

import os
import time

import pytest
import torch
import torch.nn.functional as F

from gnnforge.data import rmat
from gnnforge.distributed import (CooperativeSampler, PeerError, all_to_all_ids, edge_cut,
                                  partition_nodes, spawn)
from gnnforge.sampling import BlockSAGE, DependentKeys, LaborSampler, NeighborSampler
from tests._timeouts import SPAWN_TIMEOUT_S

pytestmark = pytest.mark.distributed

SAMPLERS = {"ns": NeighborSampler([4, 3]), "labor": LaborSampler([4, 3])}


def _problem(world_size: int):
    graph = rmat(9, 3000, seed=0).to_undirected()
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(graph.num_nodes, 8, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 3, (graph.num_nodes,), generator=generator)
    owner = partition_nodes(graph, world_size, "random", seed=1)
    seeds = torch.randperm(graph.num_nodes, generator=generator)[:96]
    return graph, features, labels, owner, seeds, DependentKeys(1, seed=4)[0]


def _model():
    torch.manual_seed(0)
    return BlockSAGE([8, 16, 3]).double()


def _cooperative_step(rank, world_size, sampler_name):
    graph, features, labels, owner, seeds, key = _problem(world_size)
    local = seeds[owner[seeds] == rank]
    coop = CooperativeSampler(SAMPLERS[sampler_name], owner)
    if world_size > 1:  # raised before any collective, so the processes stay in step
        foreign = seeds[owner[seeds] != rank][:1]
        with pytest.raises(ValueError, match=f"owned by process {1 - rank}"):
            coop.sample(graph, foreign, key)
    batch = coop.sample(graph, local, key)
    assert bool((owner[batch.input_nodes] == rank).all())
    model = _model()
    out = model(batch.blocks, features[batch.input_nodes], exchange=batch.exchanges())
    loss = F.cross_entropy(out, labels[local], reduction="sum") / seeds.numel()
    loss.backward()
    total = loss.detach().clone()
    torch.distributed.all_reduce(total)
    grads = {}
    for name, param in model.named_parameters():
        torch.distributed.all_reduce(param.grad)
        grads[name] = param.grad
    edges = [set(block.edge_ids.tolist()) for block in batch.blocks]
    return float(total), grads, edges, batch.remote_rows()


def _single_process(sampler_name):
    graph, features, labels, _, seeds, key = _problem(1)
    blocks = SAMPLERS[sampler_name].sample(graph, seeds, key=key)
    model = _model()
    out = model(blocks, features[blocks[0].src_nodes])
    loss = F.cross_entropy(out, labels[seeds], reduction="sum") / seeds.numel()
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return loss.item(), grads, [set(b.edge_ids.tolist()) for b in blocks]


def _check(results, sampler_name):
    for result in results:
        assert result.error is None, result.error
    loss, grads, edges = _single_process(sampler_name)
    for result in results:
        coop_loss, coop_grads, _, _ = result.value
        assert coop_loss == pytest.approx(loss, rel=1e-10)
        for name, grad in grads.items():
            torch.testing.assert_close(coop_grads[name], grad, rtol=1e-9, atol=1e-12)
    for layer, layer_edges in enumerate(edges):  # the processes drew exactly the same edges
        union = set().union(*(r.value[2][layer] for r in results))
        assert union == layer_edges


def test_one_process_equals_single_process():
    _check(spawn(_cooperative_step, 1, args=("ns",), timeout_s=SPAWN_TIMEOUT_S), "ns")


@pytest.mark.parametrize("sampler_name", ["ns", "labor"])
def test_two_processes_equal_single_process(sampler_name):
    results = spawn(_cooperative_step, 2, args=(sampler_name,), timeout_s=SPAWN_TIMEOUT_S)
    _check(results, sampler_name)
    sent = [r.value[3][0] for r in results]
    received = [r.value[3][1] for r in results]
    assert sum(sent) == sum(received) > 0  # rows really crossed processes


def _dies_or_hangs(rank, world_size, mode):
    torch.distributed.barrier()  # both processes are fully connected before one fails
    if rank == 1:
        if mode == "die":
            os._exit(3)
        time.sleep(4)
        return None
    start = time.monotonic()
    try:
        all_to_all_ids([torch.arange(3), torch.arange(2)])
    except PeerError as error:
        return str(error), time.monotonic() - start
    return "no error", time.monotonic() - start


def test_dead_peer_raises_clear_error():
    results = spawn(_dies_or_hangs, 2, args=("die",), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=5)
    assert results[1].exitcode == 3, results
    assert results[0].error is None, results[0].error
    message, elapsed = results[0].value
    assert "rank 0: all_to_all of vertex ids (counts) failed" in message, message
    assert elapsed < 20  # the 5 s collective timeout at the latest, plus a loaded machine


@pytest.mark.slow
def test_hung_peer_times_out_with_clear_error():
    results = spawn(_dies_or_hangs, 2, args=("hang",), timeout_s=SPAWN_TIMEOUT_S,
                    collective_timeout_s=2)
    assert results[0].error is None, results[0].error
    message, elapsed = results[0].value
    assert "did not answer within" in message and elapsed < 8


def test_partitions():
    graph = rmat(9, 3000, seed=0).to_undirected()
    random = partition_nodes(graph, 2, "random", seed=0)
    assert torch.bincount(random).tolist() == [256, 256]
    metis = partition_nodes(graph, 2, "metis")
    assert set(metis.tolist()) == {0, 1}
    assert edge_cut(graph, metis) < edge_cut(graph, random)
    with pytest.raises(ValueError, match="method"):
        partition_nodes(graph, 2, "spectral")
