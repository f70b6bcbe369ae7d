"""The layers' GEMMs on torch's library (MKL) vs oneDNN, and which one gnnforge records.

For the products a 2-layer GCN/GAT/SAGE step makes on PubMed (its 500 features) and on
GitHub (128 random features), hidden 64 (128 for SAGE's two projections side by side):
the forward projection X W, the input gradient G W^T and the weight gradient X^T G, each
timed on both libraries (`gnnforge.ops._dense_product`), median of --repeats interleaved
rounds (benchmarks/_interleaved.py), and the library the machine's record holds for the
product's class (`library_for`: measured on first use, as the layers do). A "choice"
that is not the faster column's library is a selection miss.

    python benchmarks/dense_product.py
    python benchmarks/dense_product.py --threads 1
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

from gnnforge.data import load_dataset
from gnnforge.ops import _dense_product

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import interleaved_median_ms  # noqa: E402


def _inputs(name: str) -> torch.Tensor:
    if name == "pubmed":
        return load_dataset("pubmed").graph.node_data["x"].float().contiguous()
    generator = torch.Generator().manual_seed(0)
    return torch.randn(load_dataset("musae-git").graph.num_nodes, 128, generator=generator)


def _products(x: torch.Tensor, width: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Label -> (a, b) of a layer's three products at output width `width`."""
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(width, x.shape[1], generator=generator)          # nn.Linear's
    grad = torch.randn(x.shape[0], width, generator=generator)
    return {f"X W [{x.shape[0]}, {x.shape[1]}] x [{x.shape[1]}, {width}]": (x, weight.t()),
            f"G W^T [{x.shape[0]}, {width}] x [{width}, {x.shape[1]}]": (grad, weight),
            f"X^T G [{x.shape[1]}, {x.shape[0]}] x [{x.shape[0]}, {width}]": (x.t(), grad)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="pubmed,github")
    parser.add_argument("--widths", default="64,128")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: python benchmarks/dense_product.py {' '.join(argv or sys.argv[1:])}")
    print()
    print("| dataset | product | torch (MKL) ms | oneDNN ms | oneDNN speed-up | recorded "
          "choice | class |")
    print("|---|---|---|---|---|---|---|")
    misses = 0
    for name in args.datasets.split(","):
        x = _inputs("pubmed" if name == "pubmed" else "github")
        for width in (int(w) for w in args.widths.split(",")):
            for label, (a, b) in _products(x, width).items():
                times = interleaved_median_ms(
                    {library: (lambda library=library: _dense_product._compute(library, a, b))
                     for library in _dense_product.LIBRARIES}, args.repeats)
                choice = _dense_product.library_for(a, b)
                faster = min(times, key=times.get)
                misses += choice != faster and max(times.values()) > 1.1 * min(times.values())
                print(f"| {name} | {label} | {times['torch']:.2f} | {times['onednn']:.2f} | "
                      f"{times['torch'] / times['onednn']:.2f}x | {choice} | "
                      f"`{_dense_product.product_class(a, b)}` |", flush=True)
    print()
    print(f"selection misses (the recorded library over 10% slower in this run): {misses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
