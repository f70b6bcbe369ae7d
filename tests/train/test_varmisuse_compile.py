"""VarMisuse's static step (`--compile`, `--device xla`): the masked all-slot loss equals
`candidate_loss` (banded, and sparse on padded batches), and a banded run compiles once
with no graph break or recompile."""

from __future__ import annotations

import copy

import pytest
import torch
import torch._dynamo

from gnnforge.banded import compile_blocks, compile_dataset, supergraph_batch
from gnnforge.data import program_graphs
from gnnforge.train import VarMisuseConfig, run_varmisuse, varmisuse_examples
from gnnforge.train._varmisuse import VarMisuseModel, candidate_loss
from gnnforge.train._varmisuse_data import VARMISUSE_EDGE_TYPES
from gnnforge.train._varmisuse_static import (
    SparsePad,
    banded_inputs,
    sparse_inputs,
    static_candidate_loss,
)


@pytest.fixture(scope="module")
def banded_batches():
    corpus = program_graphs(max_files=4, progress=False)
    examples = varmisuse_examples(corpus, 2, seed=0, progress=False)
    compiled = compile_dataset(examples.graphs, 64, 4, num_edge_types=len(VARMISUSE_EDGE_TYPES),
                               progress=False)
    batches = []
    for group in compiled.supergraphs[:4]:
        batch = supergraph_batch([compiled.graphs[i] for i in group], compiled.num_slots)
        batches.append((batch, compile_blocks(batch, 64, compiled.num_edge_types,
                                              compiled.num_blocks)))
    return examples.num_labels, batches


def _assert_same_step(model, reference, ours, theirs) -> None:
    """The static loss (`ours`: loss, correct, count) equals `candidate_loss`'s (`theirs`),
    and so do the gradients it leaves in `model` and `reference`; both are then zeroed."""
    (loss, correct, count), (expected, expected_correct, expected_count) = ours, theirs
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    assert (int(correct), int(count)) == (expected_correct, expected_count)
    loss.backward()
    expected.backward()
    for mine, other in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, other.grad, rtol=1e-10, atol=1e-12)
    model.zero_grad()
    reference.zero_grad()


def test_masked_loss_equals_candidate_loss(banded_batches):
    num_labels, batches = banded_batches
    torch.manual_seed(0)
    model = VarMisuseModel(num_labels, 16, 2).double()
    reference = copy.deepcopy(model)
    for batch, blocks in batches:
        loss, correct, count = static_candidate_loss(model, *banded_inputs(batch, blocks.to(
            dtype=torch.float64)))
        expected, expected_correct, expected_count = candidate_loss(
            reference(batch, blocks.to(dtype=torch.float64)), batch)
        _assert_same_step(model, reference, (loss, correct, count),
                          (expected, expected_correct, expected_count))


@pytest.mark.slow
def test_compiled_banded_step_equals_eager(banded_batches):
    torch._dynamo.reset()
    num_labels, batches = banded_batches
    torch.manual_seed(0)
    model = VarMisuseModel(num_labels, 16, 2)
    compiled = torch.compile(static_candidate_loss, fullgraph=True, dynamic=False)
    for batch, blocks in batches:
        ours = compiled(model, *banded_inputs(batch, blocks))
        theirs = static_candidate_loss(model, *banded_inputs(batch, blocks))
        torch.testing.assert_close(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
        assert [int(t) for t in ours[1:]] == [int(t) for t in theirs[1:]]


@pytest.mark.slow
def test_banded_run_compiles_once(tmp_path, monkeypatch):
    torch._dynamo.reset()
    results = run_varmisuse(VarMisuseConfig(max_files=4, epochs=2, hidden=16, num_steps=2,
                                            backends=("banded",), baseline=False,
                                            block_size=64, num_slots=256, compile=True,
                                            progress=False))
    assert results["compile"] == {"frames": 1, "graph_breaks": 0, "recompiles": 0}


def test_compile_needs_the_banded_backend():
    with pytest.raises(ValueError, match="compile runs the banded step"):
        run_varmisuse(VarMisuseConfig(compile=True, backends=("sparse", "banded")))


def test_padded_sparse_loss_equals_candidate_loss(banded_batches):
    """Sparse propagation through the padded static step (one size for every batch, as on
    XLA) computes the unpadded loss and gradients: padding edges only reach the padding node."""
    num_labels, batches = banded_batches
    pad = SparsePad.covering(batches[0][0].num_nodes, [b.num_edges + 7 for b, _ in batches],
                             [b.num_graphs for b, _ in batches])
    torch.manual_seed(0)
    model = VarMisuseModel(num_labels, 16, 2).double()
    reference = copy.deepcopy(model)
    for batch, _ in batches:
        inputs = sparse_inputs(batch, pad)
        assert inputs[-1].num_nodes == pad.num_nodes and inputs[-1].num_edges == pad.num_edges
        loss, correct, count = static_candidate_loss(model, *inputs)
        expected, expected_correct, expected_count = candidate_loss(reference(batch, batch), batch)
        _assert_same_step(model, reference, (loss, correct, count),
                          (expected, expected_correct, expected_count))


def test_sparse_pad_covers_every_batch_and_names_a_batch_too_big(banded_batches):
    _, batches = banded_batches
    pad = SparsePad.covering(256, [b.num_edges for b, _ in batches],
                             [b.num_graphs for b, _ in batches])
    assert pad == SparsePad(257, max(b.num_edges for b, _ in batches),
                            max(b.num_graphs for b, _ in batches) + 1)
    batch = batches[0][0]
    with pytest.raises(ValueError, match=f"{batch.num_edges} edges"):
        sparse_inputs(batch, SparsePad(pad.num_nodes, batch.num_edges - 1, pad.num_graphs))
