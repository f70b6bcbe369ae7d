"""VarMisuse: example construction, pruning, split, loss, a tiny run, and 2-process DDP sync."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gnnforge import Graph, GraphBatch
from gnnforge.data import program_graphs
from gnnforge.train import VarMisuseConfig, run_varmisuse, split_by_file, varmisuse_examples
from gnnforge.train._varmisuse import candidate_loss
from gnnforge.train._varmisuse_data import (
    ROLE_CANDIDATE,
    ROLE_HOLE,
    VARMISUSE_EDGE_TYPES,
    prune_unreachable,
)
from tests._cache import seeded_cache
from tests._timeouts import SUBPROCESS_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
SOURCE = """
def f(a, b):
    c = a + b
    d = c * a
    return d + b
"""


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNFORGE_CACHE", str(seeded_cache(tmp_path / "cache")))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(textwrap.dedent(SOURCE))
    return program_graphs(tmp_path / "src", min_count=1, progress=False)


def test_examples_hide_the_answer_and_list_candidates(corpus):
    examples = varmisuse_examples(corpus, num_steps=8, max_per_graph=100, progress=False)
    # reads: a, b (line 3), c, a (line 4), d, b (line 5); every one has >= 2 candidates
    assert examples.counts["holes_seen"] == 6 and len(examples.graphs) == 6
    assert examples.counts["fewer_than_2_candidates"] == 0
    hole_label = examples.num_labels - 1
    data_flow = [VARMISUSE_EDGE_TYPES.index(n) for n in ("LastRead", "LastWrite", "ComputedFrom")]
    data_flow += [t + 8 for t in data_flow]
    candidate_counts = []
    for example in examples.graphs:
        role, target = example.node_data["role"], example.node_data["target"]
        (hole,) = torch.nonzero(role == ROLE_HOLE).flatten().tolist()
        assert int(example.node_data["label"][hole]) == hole_label
        touching = (example.src == hole) | (example.dst == hole)
        assert not torch.isin(example.edge_type[touching], torch.tensor(data_flow)).any()
        candidates = torch.nonzero(role == ROLE_CANDIDATE).flatten()
        candidate_counts.append(candidates.numel())
        assert int(target.sum()) == 1 and bool(target[candidates].any())
        hole_edges = (example.src == hole) & torch.isin(example.dst, candidates)
        assert int(hole_edges.sum()) == candidates.numel()  # hole -> every candidate
        forward = example.edge_type < 8
        assert int(forward.sum()) * 2 == example.num_edges  # every edge has its reverse
    # candidates = variables occurring before the hole in source order (an assignment's
    # target precedes its right-hand side): line 3 a,b,c (x2); lines 4-5 a,b,c,d (x4)
    assert sorted(candidate_counts) == [3, 3, 4, 4, 4, 4]


def test_prune_unreachable_known_answer():
    path = Graph([0, 1, 2, 3], [1, 2, 3, 4], 6)  # 0->1->2->3->4, node 5 isolated
    assert prune_unreachable(path, torch.tensor([4]), 2).tolist() == [2, 3, 4]
    assert prune_unreachable(path, torch.tensor([4]), 0).tolist() == [4]
    assert prune_unreachable(path, torch.tensor([4]), 10).tolist() == [0, 1, 2, 3, 4]


def test_split_by_file_keeps_files_apart():
    graphs = [Graph([], [], 1, graph_data={"file_id": torch.tensor(i % 7)}) for i in range(50)]
    train, valid, test = split_by_file(graphs, seed=3)
    assert sorted(train + valid + test) == list(range(50))
    files = [{i % 7 for i in part} for part in (train, valid, test)]
    assert not (files[0] & files[1]) and not (files[0] & files[2]) and not (files[1] & files[2])
    with pytest.raises(ValueError, match="sum to 1"):
        split_by_file(graphs, (0.5, 0.2, 0.2))


def test_candidate_loss_matches_cross_entropy():
    graphs = []
    for count, correct in ((3, 1), (2, 0), (4, 3)):
        role = torch.tensor([0] + [ROLE_CANDIDATE] * count)
        target = torch.zeros(count + 1, dtype=torch.int64)
        target[1 + correct] = 1
        graphs.append(Graph([], [], count + 1, node_data={"role": role, "target": target}))
    batch = GraphBatch.from_graphs(graphs)
    scores = torch.randn(9, generator=torch.Generator().manual_seed(0))
    loss, correct, total = candidate_loss(scores, batch)
    pieces = [scores[0:3], scores[3:5], scores[5:9]]
    expected = torch.stack([F.cross_entropy(p[None], torch.tensor([c]))
                            for p, c in zip(pieces, (1, 0, 3))]).mean()
    assert torch.allclose(loss, expected) and total == 3
    assert correct == sum(int(p.argmax()) == c for p, c in zip(pieces, (1, 0, 3)))


def test_tiny_run_reports_every_model():
    config = VarMisuseConfig(max_files=6, hidden=16, num_steps=2, epochs=1, block_size=64,
                             num_slots=256, progress=False)
    results = run_varmisuse(config)
    assert [(r["train_backend"], r["num_steps"]) for r in results["rows"]] == [
        ("sparse", 2), ("banded", 2), ("sparse", 0)]
    for row in results["rows"]:
        assert all(0.0 <= row[k] <= 1.0 for k in ("valid_sparse", "test_sparse"))
    assert 0 < results["chance"][1] < 1 and "VarMisuse examples" in results["examples"]


def test_training_reads_no_loss_per_step_without_a_bar(monkeypatch):
    """The loss read is a host sync: with the bar off, the training loop never reads it."""
    import sys

    reads = [0]
    original = torch.Tensor.item

    def counted(tensor):
        reads[0] += sys._getframe(1).f_globals["__name__"] == "gnnforge.train._varmisuse"
        return original(tensor)
    monkeypatch.setattr(torch.Tensor, "item", counted)
    run_varmisuse(VarMisuseConfig(max_files=6, hidden=8, num_steps=1, epochs=1,
                                  block_size=32, num_slots=128, progress=False,
                                  backends=("sparse",)))
    assert reads[0] == 0


def test_the_bar_shows_the_loss_at_most_once_a_period():
    from gnnforge.train._varmisuse import _show_loss

    class Bar:
        disable, shown = False, []

        def set_postfix(self, **values):
            self.shown.append(values["loss"])
    bar, loss = Bar(), torch.tensor(0.25)
    shown_at = _show_loss(bar, loss, float("-inf"))
    for _ in range(100):
        shown_at = _show_loss(bar, loss, shown_at)
    assert bar.shown == ["0.250"]
    bar.disable = True
    assert _show_loss(bar, loss, float("-inf")) == float("-inf") and len(bar.shown) == 1


@pytest.mark.distributed
@pytest.mark.slow
def test_ddp_two_processes_stay_in_sync(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO),
               GNNFORGE_CACHE=str(seeded_cache(tmp_path / "cache")),
               OMP_NUM_THREADS="1")
    sync = tmp_path / "params"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               "2", "-m", "gnnforge.train.varmisuse_main", "--max-files", "8", "--epochs", "1",
               "--backends", "banded", "--baseline", "false", "--hidden", "16", "--num-steps",
               "2", "--block-size", "32", "--num-slots", "128", "--progress", "false",
               "--sync-file", str(sync)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "world size 2" in done.stdout
    rank0 = torch.load(f"{sync}.rank0")
    rank1 = torch.load(f"{sync}.rank1")
    torch.manual_seed(0)  # the seed both ranks initialised with
    from gnnforge.train import VarMisuseModel

    initial = VarMisuseModel(rank0["embed.weight"].shape[0], 16, 2).state_dict()
    assert rank0.keys() == rank1.keys()
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), key
    assert not torch.equal(rank0["encoder.weight"], initial["encoder.weight"])  # it trained


def test_banded_and_sparse_training_agree_step_by_step(corpus):
    """Same init, same batch: a few Adam steps banded and sparse give the same parameters."""
    from gnnforge.banded import compile_dataset
    from gnnforge.train import VarMisuseModel

    examples = varmisuse_examples(corpus, num_steps=3, max_per_graph=100, progress=False)
    compiled = compile_dataset(examples.graphs, 16, 8, len(VARMISUSE_EDGE_TYPES),
                               use_cache=False, progress=False)
    batch, blocks = compiled.supergraph(0)
    assert blocks.num_dropped == 0
    parameters = []
    for structure in (batch, blocks):
        torch.manual_seed(0)
        model = VarMisuseModel(examples.num_labels, 8, 3)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(3):
            loss, _, _ = candidate_loss(model(batch, structure), batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        parameters.append(dict(model.named_parameters()))
    for name, value in parameters[0].items():
        assert torch.allclose(value, parameters[1][name], atol=1e-5), name


@pytest.fixture
def rank_one_of_two_gpus(monkeypatch):
    """Rank 1 of a torchrun on a node with two (fake) GPUs: placements are recorded instead
    of done (everything stays on the CPU), and `_on` hands back a new batch object so that
    what was built from the moved batch can be told apart."""
    from torch import nn

    from gnnforge.train import _varmisuse

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    calls = {"current": [], "models": [], "batches": [], "wrapped": [], "moved": {}}
    monkeypatch.setattr(torch.cuda, "set_device", calls["current"].append)
    monkeypatch.setattr(_varmisuse.VarMisuseModel, "to",
                        lambda model, device: calls["models"].append(device) or model)

    def move(batch, device):
        calls["batches"].append(device)
        moved = batch.to("cpu")                                    # a new, equal object
        calls["moved"][id(moved)] = (moved, device)
        return moved
    monkeypatch.setattr(_varmisuse, "_on", move)
    monkeypatch.setattr(_varmisuse, "_distributed", lambda: (1, 2))

    class RecordingDDP(nn.Module):
        def __init__(self, module, **options):
            super().__init__()
            self.module = module
            calls["wrapped"].append(options)

        def forward(self, *args):
            return self.module(*args)
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel", RecordingDDP)
    return calls


def _tiny_banded_run(**options):
    return run_varmisuse(VarMisuseConfig(max_files=6, hidden=8, num_steps=1, epochs=1,
                                         block_size=32, num_slots=128, progress=False,
                                         backends=("banded",), device="cuda", **options))


def test_models_train_on_the_process_device(rank_one_of_two_gpus, monkeypatch):
    """Under torchrun on a GPU node each rank trains on cuda:LOCAL_RANK: the device is made
    current, the model and every batch go there, and DDP is given that device."""
    from gnnforge.train import _varmisuse

    monkeypatch.setattr(_varmisuse, "evaluate", lambda *args, **kwargs: (0.5, 0.5))
    calls = rank_one_of_two_gpus
    _tiny_banded_run()
    gpu = torch.device("cuda", 1)
    assert calls["current"] == [gpu]
    assert calls["models"] == [gpu, gpu]                      # T=1 and the T=0 baseline
    assert calls["batches"] and set(calls["batches"]) == {gpu}
    assert [options["device_ids"] for options in calls["wrapped"]] == [[1], [1]]


def test_banded_blocks_are_built_on_the_target_device(rank_one_of_two_gpus, monkeypatch):
    """Every batch's blocks are built from the batch already on the device (training:
    the process's GPU; evaluation: the model's device), never on the CPU before the copy."""
    from gnnforge.train import _varmisuse

    calls, built = rank_one_of_two_gpus, []
    original = _varmisuse.compile_blocks

    def compile_blocks(graph, *args, **kwargs):
        built.append(calls["moved"].get(id(graph), (None, None))[1])
        return original(graph, *args, **kwargs)
    monkeypatch.setattr(_varmisuse, "compile_blocks", compile_blocks)
    _tiny_banded_run(baseline=False)
    gpu = torch.device("cuda", 1)
    training = calls["batches"].count(gpu)
    assert training and built[:training] == [gpu] * training
    # Evaluation moves to the model's device (the CPU here: placements are only recorded).
    assert len(built) > training and None not in built
