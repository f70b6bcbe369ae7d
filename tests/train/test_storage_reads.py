"""Storage reads per epoch of sampled training (`storage_read_mib`): the counter itself,
what an epoch counts (from its start to the last batch's gather, evaluation excluded),
and that a resume keeps the epoch's count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnforge.train import load_config
from gnnforge.train import _sampled
from gnnforge.train._resources import storage_read_bytes
from gnnforge.train._sampled import SampledBatches

LINUX = Path("/proc/self/io").exists()


@pytest.mark.skipif(not LINUX, reason="/proc/self/io is Linux's")
def test_reading_an_evicted_mapped_file_counts_its_pages(tmp_path):
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(2**21, dtype=np.float32))       # 8 MiB
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    before = storage_read_bytes()
    total = float(np.load(path, mmap_mode="r").sum(dtype=np.float64))
    read = storage_read_bytes() - before
    assert total == (2**21 - 1) * 2**20
    if read == 0:
        pytest.skip("this filesystem serves the file without storage reads (tmpfs?)")
    assert read >= 7 * 2**20      # the pages came from storage, not from the page cache


def test_without_proc_io_the_counter_says_none(monkeypatch):
    from gnnforge.train import _resources

    monkeypatch.setattr(_resources, "Path", lambda _: Path("/nonexistent/io"))
    assert storage_read_bytes() is None


class _Counter:
    """A stand-in for /proc/self/io: read_bytes advanced by the test."""

    def __init__(self) -> None:
        self.value = 10 * 2**20

    def __call__(self) -> int:
        return self.value


def _batches(monkeypatch, counter, count_reads=True):
    from gnnforge.graph import Graph

    monkeypatch.setattr(_sampled, "storage_read_bytes", counter)
    edges = torch.randint(0, 60, (2, 400), generator=torch.Generator().manual_seed(0))
    graph = Graph(edges[0], edges[1], 60, node_data={"x": torch.randn(60, 4)})
    config = load_config({"task": "node", "mode": "sampled", "fanouts": [3, 2],
                          "batch_size": 16})
    return SampledBatches(graph, config, count_reads=count_reads), torch.arange(60)


def test_an_epoch_counts_reads_from_its_start_to_its_last_record(monkeypatch):
    counter = _Counter()
    batches, nodes = _batches(monkeypatch, counter)
    counter.value += 5 * 2**20                      # before the epoch: not counted
    steps = batches.start_epoch(0, nodes)
    for index in range(steps):
        blocks, _, _ = batches.batch(index)
        counter.value += 2**20                      # this batch's sampling and gather
        batches.record(blocks)
    counter.value += 7 * 2**20                      # evaluation: not counted
    assert batches.epoch_stats()["storage_read_mib"] == steps
    batches.start_epoch(1, nodes)                   # a new epoch starts from zero
    assert batches.epoch_stats()["storage_read_mib"] == 0


def test_reads_are_not_counted_unless_asked(monkeypatch):
    batches, nodes = _batches(monkeypatch, _Counter(), count_reads=False)
    batches.start_epoch(0, nodes)
    batches.record(batches.batch(0)[0])
    assert "storage_read_mib" not in batches.epoch_stats()


def test_a_resume_mid_epoch_keeps_the_epochs_reads(monkeypatch):
    counter = _Counter()
    batches, nodes = _batches(monkeypatch, counter)
    batches.start_epoch(0, nodes)
    counter.value += 3 * 2**20
    batches.record(batches.batch(0)[0])
    state = batches.state_dict()

    counter.value = 2**20                           # a new process: its own counter
    resumed, _ = _batches(monkeypatch, counter)
    resumed.load_state_dict(state)
    resumed.start_epoch(0, nodes)
    counter.value += 2**20
    resumed.record(resumed.batch(1)[0])
    assert resumed.epoch_stats()["storage_read_mib"] == 4


@pytest.mark.skipif(not LINUX, reason="/proc/self/io is Linux's")
def test_the_mapped_task_reports_reads_per_epoch(tmp_path, monkeypatch):
    from gnnforge.cli import main
    from tests._cache import seeded_cache

    monkeypatch.setenv("GNNFORGE_CACHE", str(seeded_cache(tmp_path / "cache")))
    out = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic-products", "--synthetic-nodes", "4096",
                 "--hidden", "16", "--fanouts", "4,3,2", "--batch-size", "128",
                 "--max-steps", "4", "--cache-size", "300", "--no-progress",
                 "--out-dir", str(out)]) == 0
    epochs = json.loads((out / "metrics.json").read_text())["epochs"]
    assert len(epochs) == 2 and all(row["storage_read_mib"] >= 0 for row in epochs)
    assert all(0 <= row["cache_miss_rate"] <= 1 for row in epochs)
