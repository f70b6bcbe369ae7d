"""The GraphBolt side of `end_to_end.py --products`: DGL 2.1's newer sampling pipeline.

DGL 2.1 ships GraphBolt's C++ library for torch 2.0.0-2.2.1 only. On the peers' venv
(torch 2.13) `dgl.graphbolt` imports but its operators are missing, so this side runs in a
venv of its own, torch 2.2.1 and DGL 2.1 (`benchmarks/graphbolt_venv.sh VENV`), named by
`--graphbolt-python`. gnnforge needs torch >= 2.4, so this child never imports it: it
reads synthetic-products' arrays from their folder with numpy and takes the initial
weights (gnnforge's OurSAGE at torch.manual_seed(0), the other sides' start) as arrays
from the parent.

Set up as DGL 2.1's examples/sampling/graphbolt/node_classification.py (CPU, no workers):
`gb.fused_csc_sampling_graph(indptr, indices)` over the CSR by destination (the files'
arrays: int64 indptr, int32 indices), features and labels in a `gb.BasicFeatureStore`,
`gb.ItemSampler(gb.ItemSet((train, labels), names=("seed_nodes", "labels")),
batch_size=1024, shuffle=True)`, `.sample_neighbor(graph, fanouts)`,
`.fetch_feature(store, node_feature_keys=["feat"])`, `gb.DataLoader(datapipe,
num_workers=0)`, and the DGL side's model (`DglSAGE`: dgl.nn.SAGEConv('mean') on
`minibatch.blocks`, torch's dropout). Everything else (steps, timing, accuracy on the
same test nodes) is `_end_to_end_products`'.

Run: `python benchmarks/_end_to_end_graphbolt.py --folder F --weights W.npz --steps N
--threads T --dropout P`; the last line is the result for the parent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GRAPHBOLT_TORCH", "graphbolt_command", "graphbolt_python", "write_weights"]

# The newest torch DGL 2.1's GraphBolt has a library for (dgl/graphbolt/libgraphbolt_*).
GRAPHBOLT_TORCH = "2.2.1"
_SCRIPT = Path(__file__).resolve()


# ----------------------------------------------------------------------------- the parent


def graphbolt_python(requested: str | None) -> tuple[str | None, str | None]:
    """(interpreter for the GraphBolt child, None) or (None, why the side cannot run).

    `requested`: --graphbolt-python. Without it, this interpreter when its GraphBolt has
    its operators (a DGL built for its torch)."""
    import subprocess

    python = requested or sys.executable
    probe = ("import torch, dgl.graphbolt; "
             "print(hasattr(torch.ops.graphbolt, 'fused_csc_sampling_graph'), torch.__version__)")
    try:
        child = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                               timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"skipped: {python} does not run ({error})"
    words = child.stdout.split()
    if child.returncode != 0 or len(words) != 2:
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1][:120]
        return None, f"skipped: dgl.graphbolt does not import in {python} ({tail})"
    if words[0] != "True":
        return None, (f"skipped: DGL's GraphBolt has no library for torch {words[1]} (DGL 2.1: "
                      f"torch 2.0.0-{GRAPHBOLT_TORCH}); --graphbolt-python names a venv "
                      "with one (benchmarks/graphbolt_venv.sh)")
    return python, None


def write_weights(path: Path, model: Any) -> None:
    """The other sides' initial weights (a state_dict) as arrays, for the child's torch."""
    np.savez(path, **{name: value.detach().numpy() for name, value in
                      model.state_dict().items()})


def graphbolt_command(python: str, folder: Path, weights: Path, steps: int, threads: int,
                      dropout: float) -> list[str]:
    return [python, str(_SCRIPT), "--folder", str(folder), "--weights", str(weights),
            "--steps", str(steps), "--threads", str(threads), "--dropout", str(dropout)]


# ----------------------------------------------------------------------------- the child


def _arrays(folder: Path) -> dict[str, np.ndarray]:
    """synthetic-products' files (gnnforge/data/_mapped_products.py writes them): the
    structure and features read into memory, as gnnforge's loader reads them where they
    fit (it advises huge pages; numpy's allocator does too for arrays of 4 MiB or more,
    its default on Linux), the rest memory-mapped copy-on-write."""
    names = ("rowptr", "col", "x", "y", "train", "test")
    read = ("rowptr", "col", "x")
    return {name: np.load(folder / f"{name}.npy", mmap_mode=None if name in read else "c")
            for name in names}


def run(folder: Path, weights: Path, steps: int, threads: int, dropout: float) -> dict:
    import torch

    torch.set_num_threads(threads)
    from _end_to_end_dgl import DglSAGE, import_dgl
    from _end_to_end_products import BATCH, FANOUTS, eval_nodes
    from _torch_free import peak_rss_mib

    import_dgl(threads)
    import dgl.graphbolt as gb

    baseline = peak_rss_mib()
    arrays = _arrays(folder)
    graph = gb.fused_csc_sampling_graph(torch.from_numpy(arrays["rowptr"]),
                                        torch.from_numpy(arrays["col"]))
    x = torch.from_numpy(arrays["x"])
    y = torch.from_numpy(np.asarray(arrays["y"], dtype=np.int64))
    store = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(x)})
    state = {name: torch.from_numpy(value) for name, value in np.load(weights).items()}
    model = DglSAGE(state, dropout)
    train = torch.from_numpy(np.asarray(arrays["train"]))
    test = eval_nodes(torch.from_numpy(np.asarray(arrays["test"])))

    def loader(nodes, shuffle: bool):
        # The seeds in the indices' dtype: GraphBolt's sampler asserts they agree.
        items = gb.ItemSet((nodes.to(graph.indices.dtype), y[nodes]),
                           names=("seed_nodes", "labels"))
        pipe = gb.ItemSampler(items, batch_size=BATCH, shuffle=shuffle)
        pipe = pipe.sample_neighbor(graph, [torch.LongTensor([f]) for f in FANOUTS])
        pipe = pipe.fetch_feature(store, node_feature_keys=["feat"])
        return gb.DataLoader(pipe, num_workers=0)

    seconds, (correct, total) = _train_and_test(model, loader(train, True),
                                                loader(test, False), steps)
    return {"side": "GraphBolt", "ms_per_step": seconds * 1e3,
            "seeds_per_s": BATCH / seconds, "work": None, "peak_rss_mib": peak_rss_mib(),
            "baseline_rss_mib": baseline, "accuracy": correct / max(total, 1),
            "eval_nodes": total, "nodes": int(arrays["rowptr"].shape[0] - 1),
            "edges": int(arrays["col"].shape[0]), "torch": torch.__version__}


def _train_and_test(model, train_loader, test_loader, steps: int):
    """(seconds per step, (correct, total)): `_end_to_end_products`' steps and accuracy."""
    import torch

    from _end_to_end_products import _accuracy, _forever, _train_step, timed_steps

    def forward(minibatch):
        return model(minibatch.blocks, minibatch.node_features["feat"]), minibatch.labels

    torch.manual_seed(0)  # the item sampler shuffles with torch's global generator
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    seconds = timed_steps(_forever(lambda _: iter(train_loader)),
                          _train_step(model, optimizer, forward), steps)
    return seconds, _accuracy(model, test_loader, forward)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.5)
    args = parser.parse_args()
    sys.path.insert(0, str(_SCRIPT.parent))
    from _end_to_end_products import print_result

    print_result(run(args.folder, args.weights, args.steps, args.threads, args.dropout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
