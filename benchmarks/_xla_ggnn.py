"""VarMisuse's GGNN on XLA: banded blocks vs sparse propagation, padded to one size or not.

The model, loss and batches are `gnnforge train --task varmisuse`'s. Three ways to run a
training step on XLA:

- banded: the masked all-slot loss over K*S slots and blocks built on the CPU (what
  `--device xla --backend banded` runs): one shape.
- sparse, padded: the same loss over the batch padded to one (nodes, edges, graph slots)
  size for the run (`--device xla --backend sparse`): one shape.
- sparse, as on the CPU: `candidate_loss` over the batch as it comes (each batch's own
  edge count, candidates selected by a boolean mask): the step the CPU path runs, which
  on XLA compiles per shape and reads the host.

Per way: steps, compiles and their seconds, executions per step (1 when nothing cuts the
step), CPU fallbacks per step (ops XLA cannot lower, host reads among them), and the
median time of the steps that did not compile.
"""

from __future__ import annotations

import statistics
import time

import torch

WAYS = ("banded", "sparse, padded", "sparse, as on the CPU")


def varmisuse_data(files: int, block_size: int, num_slots: int):
    """(number of labels, training CompiledDataset) of the first `files` library files."""
    from gnnforge.banded import compile_dataset
    from gnnforge.data import program_graphs
    from gnnforge.train import varmisuse_examples
    from gnnforge.train._varmisuse_data import VARMISUSE_EDGE_TYPES, split_by_file

    corpus = program_graphs(max_files=files, progress=False)
    examples = varmisuse_examples(corpus, 4, seed=0, progress=False)
    train, _, _ = split_by_file(examples.graphs, seed=0)
    compiled = compile_dataset([examples.graphs[i] for i in train], block_size,
                               num_slots // block_size,
                               num_edge_types=len(VARMISUSE_EDGE_TYPES), progress=False)
    return examples.num_labels, compiled


def _loss(way: str, model, batch, compiled, pad, device):
    """The step's loss for `way`, its inputs built as the training loop builds them."""
    from gnnforge.train._varmisuse import _static_inputs, candidate_loss
    from gnnforge.train._varmisuse_static import move_inputs, static_candidate_loss

    if way == "sparse, as on the CPU":
        moved = batch.to(device)
        return candidate_loss(model(moved, moved), moved)[0]
    backend = "banded" if way == "banded" else "sparse"
    inputs = move_inputs(_static_inputs(batch, backend, compiled, pad), device)
    return static_candidate_loss(model, *inputs)[0]


def ggnn_row(way: str, num_labels: int, compiled, steps: int, hidden: int, device) -> dict:
    """`steps` training steps of `way`; its row of the table."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    from gnnforge.banded import supergraph_batch
    from gnnforge.train._varmisuse import VarMisuseModel, _sparse_pad
    from gnnforge.train._xla_meter import xla_counts

    groups = compiled.supergraphs[:steps]
    batches = [supergraph_batch([compiled.graphs[i] for i in group], compiled.num_slots)
               for group in groups]
    pad = _sparse_pad({"train": compiled}, compiled.num_slots)
    torch.manual_seed(0)
    model = VarMisuseModel(num_labels, hidden, 4).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    xm.wait_device_ops()
    start = xla_counts()
    compile_start = _compile_seconds()
    steady = []
    for batch in batches:
        before = xla_counts()[0]
        began = time.perf_counter()
        loss = _loss(way, model, batch, compiled, pad, device)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        xm.wait_device_ops()
        if xla_counts()[0] == before:
            steady.append(time.perf_counter() - began)
    compiles, executions, fallbacks = (now - then for now, then in zip(xla_counts(), start))
    return {"steps": len(batches), "compiles": compiles,
            "compile_s": _compile_seconds() - compile_start,
            "executions": executions / max(len(batches), 1),
            "fallbacks": fallbacks / max(len(batches), 1),
            "edge_sizes": len({b.num_edges for b in batches}),
            "step_ms": statistics.median(steady) * 1e3 if steady else None,
            "steady_steps": len(steady)}


def _compile_seconds() -> float:
    import torch_xla.debug.metrics as metrics

    data = metrics.metric_data("CompileTime")
    return 0.0 if data is None else float(data[1]) / 1e9


def ggnn_table(rows: dict[str, dict]) -> str:
    lines = ["| step | steps | edge counts seen | compiles | compile s | executions per step "
             "| CPU fallbacks per step | step ms (median, steps without a compile) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for way, row in rows.items():
        step = ("n/a (every step compiled)" if row["step_ms"] is None
                else f"{row['step_ms']:.0f} ({row['steady_steps']} steps)")
        lines.append(f"| {way} | {row['steps']} | {row['edge_sizes']} | {row['compiles']} | "
                     f"{row['compile_s']:.1f} | {row['executions']:.2f} | "
                     f"{row['fallbacks']:.1f} | {step} |")
    return "\n".join(lines)
