"""`gnnforge train --task varmisuse --device xla`: banded and sparse (padded to one size)
training each compile twice (the first step, where Adam creates its state, and every later
one), never fall back to the CPU or read the host mid-step, and compute what the CPU does."""

from __future__ import annotations

import copy

import pytest
import torch

from gnnforge.banded import compile_blocks, compile_dataset, supergraph_batch
from gnnforge.data import program_graphs
from gnnforge.train import VarMisuseConfig, run_varmisuse, varmisuse_examples
from gnnforge.train._varmisuse import VarMisuseModel
from gnnforge.train._varmisuse_data import VARMISUSE_EDGE_TYPES
from gnnforge.train._varmisuse_static import (
    SparsePad,
    banded_inputs,
    move_inputs,
    sparse_inputs,
    static_candidate_loss,
)

pytestmark = pytest.mark.xla


def test_banded_and_sparse_training_compile_twice_without_fallbacks():
    results = run_varmisuse(VarMisuseConfig(
        max_files=8, hidden=8, num_steps=2, block_size=64, num_slots=256, epochs=2,
        baseline=False, progress=False, device="xla"))
    for row in results["rows"]:
        counts = row["xla_train"]
        assert counts["compiles"] <= 2, (row["train_backend"], counts)
        assert counts["executions_per_step"] == 1.0 and counts["fallbacks"] == 0, counts
        assert 0 <= row["valid_sparse"] <= 1
    assert results["xla"]["fallbacks"] == 0 and results["xla"]["executions_per_step"] == 1.0
    assert results["sparse_pad"]["num_nodes"] == 257


def test_static_step_equals_the_cpu_step():
    import torch_xla

    device = torch_xla.device()
    corpus = program_graphs(max_files=3, progress=False)
    examples = varmisuse_examples(corpus, 2, seed=0, progress=False)
    compiled = compile_dataset(examples.graphs, 64, 4, num_edge_types=len(VARMISUSE_EDGE_TYPES),
                               progress=False)
    batches = [supergraph_batch([compiled.graphs[i] for i in group], compiled.num_slots)
               for group in compiled.supergraphs[:2]]
    pad = SparsePad.covering(256, [b.num_edges for b in batches], [b.num_graphs for b in batches])
    torch.manual_seed(0)
    cpu_model = VarMisuseModel(examples.num_labels, 8, 2)
    model = copy.deepcopy(cpu_model).to(device)
    for batch in batches:
        blocks = compile_blocks(batch, 64, compiled.num_edge_types, compiled.num_blocks)
        for inputs in (sparse_inputs(batch, pad), banded_inputs(batch, blocks)):
            loss, correct, count = static_candidate_loss(model, *move_inputs(inputs, device))
            cpu_loss, cpu_correct, cpu_count = static_candidate_loss(cpu_model, *inputs)
            loss.backward()
            cpu_loss.backward()
            torch_xla.sync()
            torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-5, atol=1e-6)
            assert (int(count.cpu()), int(correct.cpu())) == (int(cpu_count), int(cpu_correct))
            for (name, ours), theirs in zip(model.named_parameters(), cpu_model.parameters()):
                torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-4, atol=1e-5,
                                           msg=lambda text, name=name: f"{name}: {text}")
            model.zero_grad()
            cpu_model.zero_grad()
