"""Link prediction: the edge split, negatives, seed-edge removal, metrics, training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import stochastic_block_model, uniform_random
from gnnforge.graph import Graph
from gnnforge.sampling import NeighborSampler
from gnnforge.train import load_config
from gnnforge.train._engine import fit
from gnnforge.train._link_metrics import auc, link_metrics, ranks
from gnnforge.train._link_split import LinkSplit, remove_edges
from gnnforge.train._link_task import LinkTask


def _pairs(graph: Graph) -> set[tuple[int, int]]:
    return {(min(u, v), max(u, v)) for u, v in zip(graph.src.tolist(), graph.dst.tolist())
            if u != v}


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(3, 40), edges=st.integers(3, 200), seed=st.integers(0, 10**6))
def test_split_partitions_the_pairs_and_the_message_graph_holds_train_only(nodes, edges, seed):
    graph = uniform_random(nodes, edges, seed=seed)
    if len(_pairs(graph)) < 3:
        return
    split = LinkSplit(graph, seed)
    parts = {name: {tuple(p) for p in split.pairs[name].tolist()} for name in split.pairs}
    assert set().union(*parts.values()) == _pairs(graph)
    assert sum(map(len, parts.values())) == len(_pairs(graph))      # disjoint
    assert all(parts[name] for name in ("train", "val", "test"))
    m, train = split.num_train, split.pairs["train"]
    src, dst = split.message_graph.src, split.message_graph.dst
    assert torch.equal(src[:m], train[:, 0]) and torch.equal(dst[:m], train[:, 1])
    assert torch.equal(src[m:], train[:, 1]) and torch.equal(dst[m:], train[:, 0])
    ids = torch.tensor([0, m - 1])
    assert split.edge_ids(ids).tolist() == sorted([0, m - 1, m, 2 * m - 1])


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(4, 30), edges=st.integers(3, 60), seed=st.integers(0, 10**6))
def test_negatives_are_never_edges(nodes, edges, seed):
    graph = uniform_random(nodes, edges, seed=seed)
    if len(_pairs(graph)) < 3:
        return
    split = LinkSplit(graph, seed)
    every = _pairs(graph)
    heads = torch.randint(nodes, (20,), generator=torch.Generator().manual_seed(seed))
    degree_ok = [sum(1 for p in every if h in p) < nodes - 1 for h in heads.tolist()]
    if not all(degree_ok):
        return
    tails = split.negatives(heads, 5, torch.Generator().manual_seed(seed))
    for head, row in zip(heads.tolist(), tails.tolist()):
        for tail in row:
            assert tail != head and (min(head, tail), max(head, tail)) not in every


def test_negatives_of_a_node_joined_to_everything_is_an_error():
    star = Graph(torch.zeros(5, dtype=torch.int64), torch.arange(1, 6), 6)
    split = LinkSplit(star, 0)
    with pytest.raises(ValueError, match="could not draw negatives"):
        split.negatives(torch.tensor([0]), 1, torch.Generator().manual_seed(0))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), excluded=st.integers(0, 40))
def test_remove_edges_equals_a_plain_filter(seed, excluded):
    graph = uniform_random(30, 120, seed=seed)
    seeds = torch.arange(0, 30, 3)
    blocks = NeighborSampler([4, 3]).sample(graph, seeds,
                                            generator=torch.Generator().manual_seed(seed))
    drop = torch.sort(torch.randperm(120, generator=torch.Generator().manual_seed(seed))
                      [:excluded]).values
    for block in blocks:
        kept = remove_edges(block, drop)
        src, dst = block.coo()
        expected = [(int(block.src_nodes[s]), int(block.src_nodes[d]), int(e))
                    for s, d, e in zip(src, dst, block.edge_ids) if int(e) not in set(drop.tolist())]
        ksrc, kdst = kept.coo()
        got = [(int(kept.src_nodes[s]), int(kept.src_nodes[d]), int(e))
               for s, d, e in zip(ksrc, kdst, kept.edge_ids)]
        assert got == expected
        assert torch.equal(kept.dst_nodes, block.dst_nodes)


def _config(**overrides):
    base = dict(task="link", dataset="rmat", epochs=2, hidden=16, batch_size=64,
                fanouts=[5, 5], progress=False, patience=0)
    return load_config({**base, **overrides})


def _community_graph(seed=0) -> Graph:
    return stochastic_block_model([40] * 4, 0.3, 0.005, seed=seed)


def test_a_batch_never_contains_its_own_pairs():
    task = LinkTask(_config(), graph=_community_graph(), description="sbm")
    for index in range(task.start_epoch(0)):
        batch = task.batch(index)
        ids = task._order[index * 64:(index + 1) * 64]
        pairs = {tuple(p) for p in task.split.pairs["train"][ids].tolist()}
        for block in batch["blocks"]:
            src, dst = block.coo()
            edges = zip(block.src_nodes[src].tolist(), block.src_nodes[dst].tolist())
            assert not any((min(u, v), max(u, v)) in pairs for u, v in edges)
        assert task._removed > 0   # the sampler did pick some of them before removal


def test_ranks_and_metrics_equal_plain_loops():
    generator = torch.Generator().manual_seed(0)
    positive = torch.randint(0, 5, (30,), generator=generator).float()   # ties on purpose
    negative = torch.randint(0, 5, (30, 7), generator=generator).float()
    expected = [1 + sum(n >= p for n in row) for p, row in zip(positive.tolist(),
                                                              negative.tolist())]
    assert ranks(positive, negative).tolist() == expected
    metrics = link_metrics(positive, negative, "val")
    assert math.isclose(metrics["val_mrr"], float(np.mean([1 / r for r in expected])))
    assert math.isclose(metrics["val_hits@1"], float(np.mean([r <= 1 for r in expected])))
    pairs = [(p > n) + 0.5 * (p == n) for p in positive.tolist() for n in negative.flatten()
             .tolist()]
    assert math.isclose(metrics["val_auc"], float(np.mean(pairs)))
    assert math.isnan(auc(torch.empty(0), negative))


def test_link_training_learns_communities(tmp_path):
    config = _config(epochs=8, out_dir=str(tmp_path), lr=0.05, batch_size=256)
    task = LinkTask(config, graph=_community_graph(), description="sbm")
    summary = fit(config, task, printer=lambda *_: None)
    # random scores: MRR about H(51)/51 = 0.09 and AUC 0.5
    assert summary["final test_auc (best epoch)"] > 0.7
    assert summary["final test_mrr (best epoch)"] > 0.2


def test_link_resume_is_exact(tmp_path):
    from gnnforge.train._checkpoint import load_checkpoint

    graph = _community_graph(1)
    full = _config(epochs=2, out_dir=str(tmp_path / "a"), batch_size=256)
    fit(full, LinkTask(full, graph=graph), printer=lambda *_: None)
    first = _config(epochs=1, out_dir=str(tmp_path / "b"), batch_size=256)
    fit(first, LinkTask(first, graph=graph), printer=lambda *_: None)
    resumed = _config(epochs=2, out_dir=str(tmp_path / "b"), resume=True, batch_size=256)
    fit(resumed, LinkTask(resumed, graph=graph), printer=lambda *_: None)
    a = load_checkpoint(tmp_path / "a" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "b" / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
