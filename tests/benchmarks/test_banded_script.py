"""benchmarks/banded.py: its bf16 row really trains in bf16 (the dtype reaches every
training step's autocast), checked on the CPU with spies."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from ._scripts import load_script


@pytest.fixture
def banded():
    return load_script("banded")


def test_the_bf16_row_asks_measure_for_bf16_on_the_gpu(banded, monkeypatch):
    rows = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(sys, "argv", ["banded.py", "--sizes", "64"])
    report = SimpleNamespace(report=lambda: "")
    monkeypatch.setattr(banded, "program_graphs", lambda **kwargs: report)
    monkeypatch.setattr(banded, "varmisuse_examples", lambda *args, **kwargs: report)

    def measure(examples, size, args, device, autocast_dtype=None):
        rows.append((device.type, autocast_dtype))
        return dict(S=size, K=2, kept=1.0, skipped=0, edges=10, sparse=1.0, banded=1.0)
    monkeypatch.setattr(banded, "measure", measure)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        banded.main()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32  # main turns TF32 on for the GPU rows
    assert rows == [("cpu", None), ("cuda", None), ("cuda", torch.bfloat16)]


def test_measure_trains_every_step_under_bf16_autocast(banded, monkeypatch):
    from gnnforge.data import program_graphs
    from gnnforge.train import varmisuse_examples

    examples = varmisuse_examples(program_graphs(max_files=3, progress=False), 2, seed=0,
                                  progress=False)
    seen = []
    original = banded.candidate_loss

    def candidate_loss(scores, batch):  # called inside train_step's autocast block
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return original(scores, batch)
    monkeypatch.setattr(banded, "candidate_loss", candidate_loss)
    args = SimpleNamespace(num_slots=128, batches=1, hidden=8, steps=2, repeats=1, seed=0)
    result = banded.measure(examples, 64, args, torch.device("cpu"), torch.bfloat16)
    assert result["sparse"] > 0 and result["banded"] > 0
    # sparse and banded: one warm-up and one timed step each
    assert seen == [(True, torch.bfloat16)] * 4
