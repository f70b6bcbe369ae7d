"""XLA compiles once per batch shape: gnnforge train's model on packs, on plain batches,
and on batches padded to the largest graph; VarMisuse's GGNN banded and sparse.

XLA compiles one executable per distinct graph of ops, and the shapes are part of the
graph. The main job's model (`MoleculeGIN` as `gnnforge train` builds it, Adam, the
masked mean loss) trains one pass over the same molecules batched three ways:

- packed: tuple packing (`PackedSplit`, as `gnnforge train`): one (nodes, edges, slots)
  shape, little padding.
- plain: consecutive groups of B graphs as a disjoint union (`GraphBatch.from_graphs`):
  no padding, a new shape almost every batch.
- padded: the same groups padded to B times the largest graph: one shape, mostly
  padding.

Per mode: batches, distinct shapes, compiles and their seconds (torch_xla's CompileTime),
the median step of the steps that did not compile (batch to device, loss, backward, Adam,
sync, waiting for the execution), and the node and edge padding fractions. Run it in the
XLA environment (`make xla-env`); on XLA's CPU device (PJRT_DEVICE=CPU) the step times
are XLA:CPU's on this machine, not a proxy for a TPU's.

`--table ggnn` trains VarMisuse's GGNN (`gnnforge train --task varmisuse`) banded, sparse
padded to one size, and sparse as on the CPU (`benchmarks/_xla_ggnn.py`).

    PJRT_DEVICE=CPU .venv-xla/bin/python benchmarks/xla.py
    PJRT_DEVICE=CPU .venv-xla/bin/python benchmarks/xla.py --graphs 512 --batch-graphs 32
    PJRT_DEVICE=CPU .venv-xla/bin/python benchmarks/xla.py --table ggnn --steps 12
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

MODES = ("packed", "plain", "padded")


def _batches(graphs: list, mode: str, batch_graphs: int) -> list:
    """The graphs batched as `mode` says, in dataset order (packs: pack order, epoch 0)."""
    from gnnforge.graph import GraphBatch
    from gnnforge.train import PackedSplit

    if mode == "packed":
        split = PackedSplit(graphs, range(len(graphs)), batch_graphs, seed=0, shuffle=False)
        split.plan(0)
        return [split.batch(number) for number in range(len(split))]
    groups = [graphs[start:start + batch_graphs]
              for start in range(0, len(graphs), batch_graphs)]
    if mode == "plain":
        return [GraphBatch.from_graphs(group) for group in groups]
    nodes = max(graph.num_nodes for graph in graphs)
    edges = max(graph.num_edges for graph in graphs)
    # As PackedLoader: one more node than the limit, for the padding graph's first node.
    return [GraphBatch.from_graphs(group).pad(batch_graphs * nodes + 1, batch_graphs * edges,
                                              batch_graphs + 1) for group in groups]


def _compiles() -> tuple[int, float]:
    """(compiles, seconds compiling) so far, from torch_xla's CompileTime metric."""
    import torch_xla.debug.metrics as metrics

    data = metrics.metric_data("CompileTime")
    return (0, 0.0) if data is None else (int(data[0]), float(data[1]) / 1e9)


def _run(task, batches: list, device) -> dict:
    """One pass of training steps over `batches`; the mode's row of the table."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    from gnnforge.packing import StaticBatch
    from gnnforge.train._xla_meter import xla_counts

    torch.manual_seed(0)
    model = task.build_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=task.config.lr)
    start_compiles, start_seconds = _compiles()
    start_fallbacks = xla_counts()[2]
    steady = []
    for batch in batches:
        before = _compiles()[0]
        start = time.perf_counter()
        loss = task._loss_value(model, StaticBatch.from_batch(batch).to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        xm.wait_device_ops()
        if _compiles()[0] == before:
            steady.append(time.perf_counter() - start)
    compiles, seconds = _compiles()
    shapes = {(b.num_nodes, b.num_edges, b.num_graphs) for b in batches}
    slots = [sum(b.num_nodes for b in batches), sum(b.num_edges for b in batches)]
    real = [sum(int(b.node_mask.sum()) for b in batches),
            sum(int(b.edge_mask.sum()) for b in batches)]
    return {"batches": len(batches), "shapes": len(shapes),
            "compiles": compiles - start_compiles, "compile_s": seconds - start_seconds,
            "step_ms": statistics.median(steady) * 1e3 if steady else None,
            "steady_steps": len(steady),
            "node_padding": 1 - real[0] / slots[0], "edge_padding": 1 - real[1] / slots[1],
            "fallbacks": xla_counts()[2] - start_fallbacks}


def _table(rows: dict[str, dict]) -> str:
    lines = ["| batching | batches | distinct shapes | compiles | compile s | step ms "
             "(median, steps without a compile) | node padding | edge padding | "
             "CPU fallbacks |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode, row in rows.items():
        step = ("n/a (every step compiled)" if row["step_ms"] is None
                else f"{row['step_ms']:.0f} ({row['steady_steps']} steps)")
        lines.append(f"| {mode} | {row['batches']} | {row['shapes']} | {row['compiles']} | "
                     f"{row['compile_s']:.1f} | {step} | {row['node_padding']:.1%} | "
                     f"{row['edge_padding']:.1%} | {row['fallbacks']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=256,
                        help="first N molecules of nci-tpsa (default 256)")
    parser.add_argument("--batch-graphs", type=int, default=32,
                        help="graphs per batch, as gnnforge train --batch-graphs (default 32)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {MODES}")
    parser.add_argument("--table", choices=("batching", "ggnn"), default="batching",
                        help="batching: the main job's model three ways (default); ggnn: "
                             "VarMisuse's GGNN banded vs sparse")
    parser.add_argument("--steps", type=int, default=12,
                        help="ggnn: training steps per way (default 12)")
    parser.add_argument("--files", type=int, default=30,
                        help="ggnn: standard-library files parsed (default 30)")
    args = parser.parse_args(argv)
    if args.table == "ggnn":
        _ggnn_main(args.steps, args.files)
        return
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {MODES}")

    from gnnforge._device import resolve_device
    from gnnforge.train._config import load_config
    from gnnforge.train._graph_task import GraphTask

    device = resolve_device("xla")
    config = load_config({"device": "xla", "limit": args.graphs, "progress": False,
                          "batch_graphs": args.batch_graphs})
    task = GraphTask(config)
    rows = {mode: _run(task, _batches(task.graphs, mode, args.batch_graphs), device)
            for mode in modes}
    print(f"gnnforge train's MoleculeGIN (hidden {config.hidden}, {config.layers} layers, "
          f"Adam), one pass over the first {len(task.graphs)} nci-tpsa molecules, "
          f"{args.batch_graphs} graphs per batch, on {device} (XLA:CPU step times on this "
          "machine: not a proxy for TPU speed)")
    print(_table(rows))


def _ggnn_main(steps: int, files: int, hidden: int = 64, block_size: int = 128,
               num_slots: int = 1024) -> None:
    from _xla_ggnn import WAYS, ggnn_row, ggnn_table, varmisuse_data

    from gnnforge._device import resolve_device

    device = resolve_device("xla")
    num_labels, compiled = varmisuse_data(files, block_size, num_slots)
    rows = {way: ggnn_row(way, num_labels, compiled, steps, hidden, device) for way in WAYS}
    print(f"VarMisuse GGNN (hidden {hidden}, T=4, {compiled.num_edge_types} edge types, Adam), "
          f"{steps} training batches of {num_slots} node slots (K={compiled.num_blocks} blocks "
          f"of S={block_size}) from {files} standard-library files, on {device} (XLA:CPU step "
          "times on this machine: not a proxy for TPU speed)")
    print(ggnn_table(rows))


if __name__ == "__main__":
    main()
