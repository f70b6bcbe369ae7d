"""Compiled vs eager training throughput, interleaved step by step in one process.

A task (the main job's graph task, nci-tpsa GIN on packs; or `--task node`, full-graph
GCN on Pubmed by default) is built twice from the same config, one with `compile=True`;
both models start from the same weights and see the same batches. Every step runs the eager step, then the compiled one, each timed alone
(batch build + loss + backward + optimiser step, the loop's work), so both see the same
machine load: on a shared machine the per-epoch ratio is what to read. Epoch 1 of the
compiled run includes compilation and is reported separately.

    PYTHONPATH=. python benchmarks/compile.py --epochs 6
    PYTHONPATH=. python benchmarks/compile.py --epochs 4 --limit 1000
    PYTHONPATH=. python benchmarks/compile.py --task node --epochs 30   # Pubmed GCN
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch


def _step(task, model, optimizer, index: int) -> float:
    start = time.perf_counter()
    batch = task.batch(index)
    loss, _ = task.loss(model, batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def _tasks(args: argparse.Namespace):
    from gnnforge.train._config import load_config

    if args.task == "graph":
        from gnnforge.train._graph_task import GraphTask as Task

        options = {"limit": args.limit, "epochs": args.epochs, "progress": False}
    else:
        from gnnforge.train._node_task import NodeTask as Task

        # Dropout 0: the compiled and eager runs then compute the same function (their
        # random streams differ), so the throughput compares like with like.
        options = {"task": "node", "dataset": args.dataset or "pubmed", "model": args.model,
                   "epochs": args.epochs, "progress": False, "dropout": 0.0}
    return Task(load_config(options)), Task(load_config({**options, "compile": True}))


def _items(task, steps: int) -> int:
    if hasattr(task, "loaders"):
        return sum(task.batch(i).num_real_graphs for i in range(steps))
    return int(task.train_nodes.numel()) * steps


def _describe(task, args) -> str:
    if hasattr(task, "loaders"):
        return (f"graph task (main job), {len(task.splits['train'])} train molecules, packs "
                f"{task.loaders['train'].shape}")
    return (f"node task, full-graph {args.model.upper()} on {task.description}, "
            f"{int(task.train_nodes.numel())} train nodes")


def main() -> None:
    from gnnforge.train._cli import set_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("graph", "node"), default="graph")
    parser.add_argument("--dataset", default=None, help="node task: default pubmed")
    parser.add_argument("--model", default="gcn", help="node task: gcn or sage")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--limit", type=int, default=0, help="graph task: molecules")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    set_threads(args.threads)
    eager_task, compiled_task = _tasks(args)
    torch.manual_seed(0)
    eager_model = eager_task.build_model()
    compiled_model = compiled_task.build_model()
    compiled_model.load_state_dict(copy.deepcopy(eager_model.state_dict()))
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3)
                  for m in (eager_model, compiled_model)]
    rows = []
    for epoch in range(args.epochs):
        steps = eager_task.start_epoch(epoch)
        compiled_task.start_epoch(epoch)
        graphs = _items(eager_task, steps)
        seconds = [0.0, 0.0]
        for index in range(steps):
            seconds[0] += _step(eager_task, eager_model, optimizers[0], index)
            seconds[1] += _step(compiled_task, compiled_model, optimizers[1], index)
        rows.append((epoch + 1, graphs / seconds[0], graphs / seconds[1], seconds))
    items = eager_task.items
    print(f"{_describe(eager_task, args)}, {args.epochs} epochs, {args.threads} thread(s), "
          "steps interleaved")
    print(f"| epoch | eager {items}/s | compiled {items}/s | compiled / eager |")
    print("|---:|---:|---:|---:|")
    for epoch, eager, compiled, _ in rows:
        note = " (includes compilation)" if epoch == 1 else ""
        print(f"| {epoch} | {eager:.0f} | {compiled:.0f}{note} | {compiled / eager:.2f} |")
    later = rows[1:]
    print(f"median over epochs 2..{args.epochs}: eager "
          f"{statistics.median(r[1] for r in later):.0f}, compiled "
          f"{statistics.median(r[2] for r in later):.0f} {items}/s, ratio "
          f"{statistics.median(r[2] / r[1] for r in later):.2f}; compile time (epoch 1 "
          f"excess) {rows[0][3][1] - rows[0][3][0]:.0f} s")
    print(compiled_task.compiled.report())


if __name__ == "__main__":
    main()
