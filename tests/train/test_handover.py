"""Device handover of cooperative and partitioned training.

Without a GPU the handover is observed instead of run: in two gloo processes a spy on
`gnnforge._device.to_device` records every tensor it returns, and the model's forward,
the loss and the embedding exchanges check that each tensor they receive is one of those
(blocks, input rows, labels, the exchange plans' indices), while the sampler's and the
feature rows' collectives get host tensors that never went through it. `process_device`
gives each torchrun process its own GPU; `--device cuda` without CUDA is one line.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from functools import partial

import pytest
import torch

from gnnforge.distributed import spawn
from gnnforge.sampling import Block
from tests._timeouts import SPAWN_TIMEOUT_S, SUBPROCESS_TIMEOUT_S
from tests.distributed.test_partitioned import _options, _write

_FIELDS = ("src_nodes", "rowptr", "col", "edge_ids", "edge_weight")


class _Spy:
    """Installs the checks in a spawned process; `report()` says what it saw."""

    def __init__(self) -> None:
        import torch.distributed as dist
        import torch.nn.functional as F

        from gnnforge import _device
        from gnnforge.nn import NodeClassifier

        self.handed: list[torch.Tensor] = []   # kept alive: identity is the evidence
        self.devices: set[str] = set()
        self.missed: list[str] = []
        self.forwards = self.losses = 0
        self.collectives: list[tuple[str, bool, bool, bool]] = []
        to_device, forward, loss = _device.to_device, NodeClassifier.forward, F.cross_entropy
        all_to_all = dist.all_to_all_single

        def spy_to_device(tensor, device):
            out = to_device(tensor, device)
            self.devices.add(str(device))
            self.handed.append(out)
            return out

        def checked_forward(model, blocks, x, exchange=None):
            if not isinstance(blocks, list):  # full-graph evaluation (NodeTask): no handover
                return forward(model, blocks, x, exchange=exchange)
            self.forwards += 1
            for layer, block in enumerate(blocks):
                for name in _FIELDS:
                    self._check(getattr(block, name), f"blocks[{layer}].{name}")
            self._check(x, "x")
            for layer, fn in enumerate(exchange or []):
                if isinstance(fn, partial):  # an embedding exchange: its plan moved too
                    plan = fn.keywords["plan"]
                    self._check(plan.recv_order, f"exchange[{layer}].recv_order")
                    self._check(plan.send_index, f"exchange[{layer}].send_index")
            return forward(model, blocks, x, exchange=exchange)

        def checked_loss(logits, target, *args, **kwargs):
            self.losses += 1
            self._check(target, "labels")
            return loss(logits, target, *args, **kwargs)

        def recorded_all_to_all(output, input, *args, **kwargs):
            thread = threading.current_thread().name
            self.collectives.append((thread, self._was_handed(input) or
                                     self._was_handed(output),
                                     input.device.type == "cpu" and output.device.type == "cpu",
                                     bool(kwargs.get("async_op", False))))
            return all_to_all(output, input, *args, **kwargs)

        _device.to_device = spy_to_device
        NodeClassifier.forward = checked_forward
        F.cross_entropy = checked_loss
        dist.all_to_all_single = recorded_all_to_all

    def _was_handed(self, tensor) -> bool:
        return any(tensor is seen for seen in self.handed)

    def _check(self, tensor, what: str) -> None:
        if tensor is not None and not self._was_handed(tensor):
            self.missed.append(what)

    def report(self) -> dict:
        prefetched = [c for c in self.collectives if c[0] == "gnnforge-prefetch"]
        return {"devices": sorted(self.devices), "missed": sorted(set(self.missed)),
                "forwards": self.forwards, "losses": self.losses,
                "all_cpu": all(c[2] for c in self.collectives),
                "prefetch_collectives": len(prefetched),
                "prefetch_handed": sum(c[1] for c in prefetched),
                "async": sum(c[3] for c in self.collectives)}


def _spied_partitioned(rank, world_size, options):
    from gnnforge.train import fit, load_config
    from gnnforge.train._partitioned import PartitionedNodeTask

    spy = _Spy()
    config = load_config(options)
    fit(config, PartitionedNodeTask(config), printer=lambda *_: None)
    return spy.report()


def _spied_cooperative(rank, world_size, options):
    from gnnforge.train import NodeTask, fit, load_config

    spy = _Spy()
    config = load_config(options)
    fit(config, NodeTask(config), printer=lambda *_: None)
    return spy.report()


def _reports(results) -> list[dict]:
    for result in results:
        assert result.error is None and result.value is not None, \
            result.error or f"rank {result.rank} timed out or died (exit {result.exitcode})"
    return [result.value for result in results]


@pytest.mark.distributed
@pytest.mark.parametrize("mode", ["cooperative", "independent"])
def test_partitioned_training_hands_every_model_input_over(tmp_path, mode):
    _write(tmp_path / "parts", parts=2)
    options = _options(tmp_path / "parts", tmp_path / "out", epochs=1, prefetch=1,
                       distributed=mode)
    reports = _reports(spawn(_spied_partitioned, 2, args=(options,),
                             timeout_s=SPAWN_TIMEOUT_S, collective_timeout_s=120))
    for report in reports:
        assert report["missed"] == [], report
        assert report["devices"] == ["cpu"]
        assert report["forwards"] > 0 and report["losses"] > 0
        assert report["all_cpu"]
        # The prefetching thread samples and fetches rows: host tensors only.
        assert report["prefetch_collectives"] > 0 and report["prefetch_handed"] == 0
        # Cooperative: each minibatch's input rows travel asynchronously (training and
        # evaluation); independent owners serve rows with blocking calls.
        assert (report["async"] > 0) == (mode == "cooperative"), report


@pytest.mark.distributed
def test_cooperative_training_hands_every_model_input_over(tmp_path):
    options = dict(task="node", dataset="sbm", mode="sampled", fanouts=[5, 5], batch_size=64,
                   epochs=1, hidden=16, layers=2, dropout=0.0, progress=False,
                   out_dir=str(tmp_path), distributed="cooperative")
    reports = _reports(spawn(_spied_cooperative, 2, args=(options,),
                             timeout_s=SPAWN_TIMEOUT_S, collective_timeout_s=120))
    for report in reports:
        assert report["missed"] == [], report
        assert report["devices"] == ["cpu"] and report["forwards"] > 0
        assert report["all_cpu"]


def test_handover_moves_blocks_rows_labels_and_plans():
    from gnnforge.distributed._exchange import ExchangePlan
    from gnnforge.train._handover import handover

    block = Block(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]), torch.tensor([1, 2]),
                  torch.tensor([5, 6]))
    plan = ExchangePlan(torch.tensor([1, 0]), [1, 1], torch.tensor([0]), [1, 0])
    on = handover([block, block], torch.ones(3, 4), torch.tensor([1, 0]), [None, plan],
                  group=None, device=torch.device("cpu"))
    assert on.exchanges[0](on.x) is on.x  # the input rows arrived already
    assert on.exchanges[1].keywords["plan"].recv_order.equal(plan.recv_order)
    assert on.blocks[1].col.equal(block.col) and on.labels.equal(torch.tensor([1, 0]))
    assert handover([block], torch.ones(3, 4), torch.tensor([0]), None, None,
                    torch.device("cpu")).exchanges is None


def _fake_gpus(monkeypatch, count: int, local_rank: int | None, local_world: int = 1):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    if local_rank is not None:
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))


def test_each_torchrun_process_takes_its_own_gpu(monkeypatch):
    from gnnforge._device import process_device

    _fake_gpus(monkeypatch, 4, local_rank=2, local_world=4)
    assert process_device("cuda") == torch.device("cuda", 2)
    assert process_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="the 4 processes of this node would all use cuda:1"):
        process_device("cuda:1")
    _fake_gpus(monkeypatch, 2, local_rank=3, local_world=4)
    with pytest.raises(ValueError, match="LOCAL_RANK=3 needs cuda:3, but this machine has 2"):
        process_device("cuda")
    _fake_gpus(monkeypatch, 2, local_rank=0, local_world=1)  # one process per node
    assert process_device("cuda:1") == torch.device("cuda", 1)
    _fake_gpus(monkeypatch, 2, local_rank=None)               # no torchrun
    assert process_device("cuda") == torch.device("cuda")


def test_cooperative_and_partitioned_take_a_gpu(monkeypatch):
    from gnnforge.train import load_config

    _fake_gpus(monkeypatch, 2, local_rank=1, local_world=2)
    for extra in ({"dataset": "sbm", "distributed": "cooperative"},
                  {"partitioned": "parts", "distributed": "cooperative"},
                  {"partitioned": "parts", "distributed": "independent"}):
        config = load_config({"task": "node", "mode": "sampled", "device": "cuda", **extra})
        assert config.device == "cuda"  # resolved per process: cuda:LOCAL_RANK


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cooperative_cuda_without_cuda_is_one_line():
    result = subprocess.run([sys.executable, "-m", "gnnforge.cli", "train", "--task", "node",
                             "--mode", "sampled", "--distributed", "cooperative", "--device",
                             "cuda", "--epochs", "1"], capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--device cuda: CUDA is not available (this torch build has no CUDA support); use "
        "--device cpu"), result.stderr
    assert "Traceback" not in result.stderr
