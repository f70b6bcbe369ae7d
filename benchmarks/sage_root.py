"""SAGE's first layer on ungathered rows: one product over [aggr | root] rows vs two.

The first layer of a products-sized minibatch (synthetic-products, fanouts [15, 10, 5],
batch 1024; `--nodes` a smaller generated graph), `SAGEConv(F, 256)` mean on
`IndexedRows(features, block.src_nodes)`, forward and backward (the weights' gradients),
computed both ways in interleaved rounds (benchmarks/_interleaved.py), median of
--repeats rounds, each method on every one of --batches minibatches in turn:
- split: the mean from the table, the destinations' rows gathered, and a sum of two
  products (`SAGEConv._split_root_forward`, the layer's code before the joined form);
- joined: one mean over the block with each destination's own row beside its in-edges,
  viewed as [Nd, 2F], and one product against [W_l; W_r] (`_joined_root_forward`, what
  the layer runs on the CPU).
Each row prints the largest difference between the two outputs.

    python benchmarks/sage_root.py
    python benchmarks/sage_root.py --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time
from pathlib import Path

import torch

from gnnforge.data import load_synthetic_products
from gnnforge.data._mapped_products import PRODUCTS_NODES
from gnnforge.nn import IndexedRows, SAGEConv
from gnnforge.sampling import InEdges, NeighborSampler, NodeSeeds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import interleaved_median_ms  # noqa: E402

FANOUTS, BATCH, HIDDEN = [15, 10, 5], 1024, 256


def first_blocks(data, batches: int) -> list:
    """The first layer's block of each of the first `batches` training minibatches."""
    edges = InEdges(data.rowptr, data.col, data.col[:0], data.num_nodes)
    sampler, generator = NeighborSampler(FANOUTS), torch.Generator().manual_seed(0)
    seeds = list(NodeSeeds(data.train, BATCH, seed=0))[:batches]
    return [sampler.sample(edges, batch, generator=generator)[0] for batch in seeds]


def step(conv: SAGEConv, forward, block, table: torch.Tensor, grad: torch.Tensor):
    """Forward on the block's ungathered rows, then the weights' gradients."""
    conv.zero_grad(set_to_none=True)
    out = forward(block, IndexedRows(table, block.src_nodes))
    out.backward(grad[:out.shape[0]])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    data = load_synthetic_products(args.nodes)
    table = torch.as_tensor(data.x)
    blocks = first_blocks(data, args.batches)
    torch.manual_seed(0)
    conv = SAGEConv(table.shape[1], HIDDEN)
    grad = torch.randn(max(block.num_dst_nodes for block in blocks), HIDDEN,
                       generator=torch.Generator().manual_seed(1))
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: python benchmarks/sage_root.py {' '.join(argv or sys.argv[1:])}")
    print(f"synthetic-products {data.num_nodes:,} nodes; layer 1 of fanouts {FANOUTS}, batch "
          f"{BATCH}: SAGEConv({table.shape[1]}, {HIDDEN}) mean, forward + weight gradients")
    print()
    print("| threads | destinations (mean) | in-edges (mean) | split ms | joined ms | speed-up "
          "| max abs difference |")
    print("|---|---|---|---|---|---|---|")
    methods = {"split": conv._split_root_forward, "joined": conv._joined_root_forward}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        turn = {name: itertools.count() for name in methods}

        def call(name):
            return step(conv, methods[name], blocks[next(turn[name]) % len(blocks)], table,
                        grad)
        times = interleaved_median_ms({name: (lambda name=name: call(name))
                                       for name in methods}, args.repeats)
        difference = max(float((step(conv, methods["split"], block, table, grad)
                                - step(conv, methods["joined"], block, table, grad))
                               .detach().abs().max()) for block in blocks)
        destinations = sum(block.num_dst_nodes for block in blocks) / len(blocks)
        edges = sum(block.num_edges for block in blocks) / len(blocks)
        print(f"| {threads} | {destinations:,.0f} | {edges:,.0f} | {times['split']:.1f} | "
              f"{times['joined']:.1f} | {times['split'] / times['joined']:.2f}x | "
              f"{difference:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
