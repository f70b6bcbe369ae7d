"""benchmarks/xla.py builds its three batchings right (on the CPU: no torch_xla needed):
packs and padded batches have one shape each, plain batches no padding."""

from __future__ import annotations

from tests.benchmarks._scripts import load_script
from tests.nn.test_models import molecules


def test_packed_and_padded_have_one_shape_and_plain_none_of_padding():
    script = load_script("xla")
    graphs = molecules(40, seed=3)
    shapes = {}
    for mode in script.MODES:
        batches = script._batches(graphs, mode, 8)
        real = [graph for batch in batches for graph in batch.unbatch()]
        assert len(real) == len(graphs)
        shapes[mode] = {(b.num_nodes, b.num_edges, b.num_graphs) for b in batches}
    assert len(shapes["packed"]) == len(shapes["padded"]) == 1
    assert all(bool(b.node_mask.all()) for b in script._batches(graphs, "plain", 8))
    (nodes, edges, slots), = shapes["padded"]
    assert (nodes, edges, slots) == (8 * max(g.num_nodes for g in graphs) + 1,
                                     8 * max(g.num_edges for g in graphs), 9)


def test_ggnn_table_has_a_row_per_way_and_says_when_every_step_compiled():
    script = load_script("_xla_ggnn")
    row = {"steps": 3, "edge_sizes": 3, "compiles": 2, "compile_s": 1.25, "executions": 1.0,
           "fallbacks": 0.0, "step_ms": 12.5, "steady_steps": 1}
    rows = {way: dict(row) for way in script.WAYS}
    rows[script.WAYS[-1]].update(step_ms=None, steady_steps=0)
    lines = script.ggnn_table(rows).splitlines()
    assert len(lines) == 2 + len(script.WAYS)
    assert lines[2] == "| banded | 3 | 3 | 2 | 1.2 | 1.00 | 0.0 | 12 (1 steps) |"
    assert lines[-1].endswith("| n/a (every step compiled) |")
