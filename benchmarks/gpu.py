"""GPU benchmarks: gnnforge's Triton kernels and layers beside cuSPARSE, PyG and DGL.

One command prints every table on a machine with an NVIDIA GPU:

  spmm      copy_u_sum on R-MAT 2^17/2^21 (shared/datasets/synthetic) and Pubmed, F = 16,
            64, 256, fwd and fwd+bwd: gnnforge 'triton' (the CUDA default), gnnforge
            'torch' (the chunked PyTorch path it replaces), torch.sparse.mm on a CSR
            tensor (cuSPARSE), PyG's scatter and DGL's copy_u_sum where they import.
  kernels   the other aggregations at F = 64 (u_mul_e_sum, copy_u_mean, copy_u_max,
            u_dot_v, edge_softmax with 4 heads): triton vs torch backend vs PyG.
  train     one full-graph training step on Pubmed (forward, cross-entropy, backward,
            Adam): GCN, GAT (8 heads) and GraphSAGE-mean, gnnforge vs PyG.
  banded    GGNN training on VarMisuse program graphs, sparse vs banded propagation, fp32
            (TF32 matmuls) and bf16 autocast, S = 128, 256, 512 (benchmarks/banded.py's
            workload; the paper's Appendix D found banded slower than sparse on a V100).
  gin       MoleculeGIN trained as `gnnforge train --compile` does (fixed-shape packs as
            StaticBatch, the masked loss under CompiledLoss: one compile, its counts
            printed) vs the same model in PyG with its DataLoader (benchmarks/
            end_to_end.py's MOSES TPSA workload), ms per epoch including the
            host-to-device copies of every batch; PyG's column is skipped, with the
            reason, where it does not import.

Every time is the median of --repeats runs after --warmup runs, measured with CUDA
events around the call (so the GPU work and any host gaps inside it count, and nothing
is timed before the GPU finished). A row that fails prints its error instead of a time.

    PYTHONPATH=. python benchmarks/gpu.py                    # every section
    PYTHONPATH=. python benchmarks/gpu.py --sections spmm,train --repeats 20

Without a CUDA device it prints one line saying so and exits 0. `--cpu-dry-run` runs
every section on the CPU with tiny inputs and the CPU backends, compiling with aot_eager
instead of inductor (numbers meaningless; it checks the script's plumbing where no GPU is
available).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SECTIONS = ("spmm", "kernels", "train", "banded", "gin")


def no_gpu_reason() -> str | None:
    """Why this machine cannot run the GPU rows, or None when it can."""
    if torch.version.cuda is None:
        return f"no CUDA device: torch {torch.__version__} is a CPU-only build"
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    return None


# ----------------------------------------------------------------------------- timing


def median_ms(function: Callable[[], object], device: torch.device, repeats: int,
              warmup: int) -> float:
    """Median milliseconds of `function()`: CUDA events on the GPU, perf_counter on CPU."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            function()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            function()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def attempt(function: Callable[[], float]) -> str:
    """The formatted time of `function()`, or the error it raised (one line)."""
    try:
        return f"{function():.3f}"
    except Exception as error:  # a peer or path failing must not hide the other rows
        return f"error: {type(error).__name__}: {str(error).splitlines()[0][:80]}"


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)


def ratio(slow: str, fast: str) -> str:
    try:
        return f"{float(slow) / float(fast):.2f}x"
    except ValueError:
        return "n/a"


# ----------------------------------------------------------------------------- peers


def pyg_scatter():
    if importlib.util.find_spec("torch_geometric") is None:
        return None
    from torch_geometric.utils import scatter
    return scatter


def dgl_module():
    """dgl, or None when it is absent or fails to import with this torch."""
    if importlib.util.find_spec("dgl") is None:
        return None
    try:
        import dgl
    except Exception:  # DGL's binary wheels lag torch releases
        return None
    return dgl


def gnnforge_backend(backend: str | None, function: Callable[[], torch.Tensor]):
    """`function` run under `use_backend(backend)` (None: the device default)."""
    import gnnforge.ops as ops

    def run():
        if backend is None:
            return function()
        with ops.use_backend(backend):
            return function()
    return run


def with_backward(function, leaves):
    """forward, or forward + gradients w.r.t. `leaves` (None: forward only)."""
    if not leaves:
        return function

    def run():
        out = function()
        grad = torch.ones_like(out)
        torch.autograd.grad(out, leaves, grad)
    return run


# ----------------------------------------------------------------------------- spmm


def load_graphs(args, device):
    from spmm import _load

    from gnnforge.data import shared_datasets_dir, uniform_random

    if args.cpu_dry_run:
        return {"uniform-2k": uniform_random(2000, 20_000, seed=0).to(device)}
    root = shared_datasets_dir()
    return {name: _load(name, root).to(device) for name in ("rmat", "pubmed")}


def spmm_methods(graph, width: int, backward: bool, device, gpu: bool):
    import gnnforge.ops as ops

    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(graph.num_nodes, width, generator=generator).to(device)
    x.requires_grad_(backward)
    rowptr, col, _ = graph.csr(torch.int64)
    csr = torch.sparse_csr_tensor(rowptr, col, torch.ones(graph.num_edges, device=device),
                                  (graph.num_nodes, graph.num_nodes))
    src, dst = graph.coo()
    leaves = (x,) if backward else ()
    methods = {
        "gnnforge triton" if gpu else "gnnforge default":
            gnnforge_backend(None, lambda: ops.copy_u_sum(graph, x)),
        "gnnforge torch": gnnforge_backend("torch", lambda: ops.copy_u_sum(graph, x)),
        "torch.sparse (cuSPARSE)": lambda: torch.sparse.mm(csr, x),
    }
    scatter = pyg_scatter()
    if scatter is not None:
        methods["PyG scatter"] = lambda: scatter(x[src], dst, 0, dim_size=graph.num_nodes,
                                                 reduce="sum")
    dgl = dgl_module()
    if dgl is not None:
        dgl_graph = dgl.graph((src, dst), num_nodes=graph.num_nodes)
        methods["DGL"] = lambda: dgl.ops.copy_u_sum(dgl_graph, x)
    return {name: with_backward(run, leaves) for name, run in methods.items()}


def spmm_section(args, device, gpu) -> None:
    graphs = load_graphs(args, device)
    widths = (16,) if args.cpu_dry_run else (16, 64, 256)
    rows, names = [], None
    for name, graph in graphs.items():
        for width in widths:
            for mode in ("fwd", "fwd+bwd"):
                methods = spmm_methods(graph, width, mode == "fwd+bwd", device, gpu)
                names = list(methods)
                times = [attempt(lambda run=run: median_ms(run, device, args.repeats,
                                                           args.warmup))
                         for run in methods.values()]
                rows.append([name, width, mode, *times, ratio(times[2], times[0])])
    print("\n### copy_u_sum (ms)\n")
    table(["graph", "F", "pass", *names, "cuSPARSE / ours"], rows)


# ----------------------------------------------------------------------------- kernels


def kernels_section(args, device, gpu) -> None:
    import gnnforge.ops as ops

    graphs = load_graphs(args, device)
    scatter = pyg_scatter()
    rows = []
    for name, graph in graphs.items():
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(graph.num_nodes, 64, generator=generator).to(device)
        heads = torch.randn(graph.num_nodes, 4, 16, generator=generator).to(device)
        weight = torch.rand(graph.num_edges, generator=generator).to(device)
        logits = torch.randn(graph.num_edges, 4, generator=generator).to(device)
        src, dst = graph.coo()
        cases = {
            "u_mul_e_sum": (lambda: ops.u_mul_e_sum(graph, x, weight),
                            lambda: scatter(x[src] * weight[:, None], dst, 0,
                                            dim_size=graph.num_nodes, reduce="sum")),
            "copy_u_mean": (lambda: ops.copy_u_mean(graph, x),
                            lambda: scatter(x[src], dst, 0, dim_size=graph.num_nodes,
                                            reduce="mean")),
            "copy_u_max": (lambda: ops.copy_u_max(graph, x),
                           lambda: scatter(x[src], dst, 0, dim_size=graph.num_nodes,
                                           reduce="max")),
            "u_dot_v (4 heads)": (lambda: ops.u_dot_v(graph, heads, heads),
                                  lambda: (heads[src] * heads[dst]).sum(-1, keepdim=True)),
            "edge_softmax (4 heads)": (lambda: ops.edge_softmax(graph, logits),
                                       lambda: _pyg_softmax(logits, dst, graph.num_nodes)),
        }
        for case, (ours, theirs) in cases.items():
            timed = lambda f: attempt(lambda: median_ms(f, device, args.repeats,  # noqa: E731
                                                        args.warmup))
            default = timed(gnnforge_backend(None, ours))
            torch_path = timed(gnnforge_backend("torch", ours))
            peer = timed(theirs) if scatter is not None else "PyG not installed"
            rows.append([name, case, default, torch_path, peer, ratio(peer, default)])
    print("\n### other kernels, forward, F = 64 (ms)\n")
    table(["graph", "kernel", "gnnforge triton" if gpu else "gnnforge default",
           "gnnforge torch", "PyG / plain torch", "PyG / ours"], rows)


def _pyg_softmax(logits, index, num_nodes):
    from torch_geometric.utils import softmax
    return softmax(logits, index, num_nodes=num_nodes)


# ----------------------------------------------------------------------------- train


def train_section(args, device, gpu) -> None:
    import torch.nn.functional as F

    from gnnforge.data import read_planetoid, shared_datasets_dir, uniform_random

    if args.cpu_dry_run:
        graph = uniform_random(500, 4000, seed=0)
        x, y = torch.randn(500, 32), torch.randint(0, 3, (500,))
        train = torch.ones(500, dtype=torch.bool)
    else:
        graph, _ = read_planetoid(shared_datasets_dir() / "planetoid", "pubmed")
        x, y, train = (graph.node_data[k] for k in ("x", "y", "train_mask"))
    graph = graph.to(device)
    x, y, train = x.to(device), y.to(device), train.to(device)
    edge_index = torch.stack(graph.coo())
    classes = int(y.max()) + 1
    rows = []
    for model_name in ("GCN", "GAT", "SAGE"):
        times = []
        for side in ("gnnforge", "PyG"):
            def step_time(side=side):
                torch.manual_seed(0)
                model = _model(side, model_name, x.shape[1], classes).to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
                structure = graph if side == "gnnforge" else edge_index

                def step():
                    loss = F.cross_entropy(model(structure, x)[train], y[train])
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                return median_ms(step, device, args.repeats, args.warmup)
            times.append(attempt(step_time))
        rows.append([model_name, *times, ratio(times[1], times[0])])
    print(f"\n### full-graph training step, {'Pubmed' if not args.cpu_dry_run else 'tiny'} "
          f"(ms per step)\n")
    table(["model", "gnnforge", "PyG", "PyG / gnnforge"], rows)


def _model(side: str, name: str, width_in: int, classes: int) -> torch.nn.Module:
    """Two layers of `name` with ReLU between: GCN 64 wide, GAT 8 heads x 8, SAGE-mean 64."""
    import torch.nn.functional as F
    from torch import nn

    if side == "gnnforge":
        import gnnforge.nn as library
    else:
        import torch_geometric.nn as library
    if name == "GCN":
        layers = [library.GCNConv(width_in, 64), library.GCNConv(64, classes)]
    elif name == "GAT":
        layers = [library.GATConv(width_in, 8, heads=8), library.GATConv(64, classes, heads=1)]
    else:
        layers = [library.SAGEConv(width_in, 64), library.SAGEConv(64, classes)]

    class TwoLayers(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(layers)

        def forward(self, structure, h):
            first, second = self.layers
            call = ((lambda layer, h: layer(structure, h)) if side == "gnnforge"
                    else (lambda layer, h: layer(h, structure)))
            return call(second, F.relu(call(first, h)))

    return TwoLayers()


# ----------------------------------------------------------------------------- banded


def banded_section(args, device, gpu) -> None:
    from banded import to_device, train_step

    from gnnforge.banded import compile_blocks, compile_dataset, supergraph_batch
    from gnnforge.data import program_graphs
    from gnnforge.train import VarMisuseModel, varmisuse_examples
    from gnnforge.train._varmisuse_data import VARMISUSE_EDGE_TYPES

    steps, hidden, slots = (2, 16, 256) if args.cpu_dry_run else (8, 128, 1024)
    sizes = (128,) if args.cpu_dry_run else (128, 256, 512)
    corpus = program_graphs(max_files=3 if args.cpu_dry_run else 30, progress=False)
    examples = varmisuse_examples(corpus, steps, seed=0, progress=False)
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for precision, dtype in (("fp32/TF32", None), ("bf16 autocast", torch.bfloat16)):
        for size in sizes:
            compiled = compile_dataset(examples.graphs, size, slots // size,
                                       num_edge_types=len(VARMISUSE_EDGE_TYPES), progress=False)
            groups = range(min(3, len(compiled.supergraphs)))
            batches = [to_device(supergraph_batch(
                [compiled.graphs[i] for i in compiled.supergraphs[g]], compiled.num_slots),
                device) for g in groups]
            blocks = [compile_blocks(b, size, compiled.num_edge_types, compiled.num_blocks)
                      for b in batches]
            graphs = sum(b.num_real_graphs for b in batches)
            rates = []
            for structures in (batches, blocks):
                def rate(structures=structures):
                    torch.manual_seed(0)
                    model = VarMisuseModel(examples.num_labels, hidden, steps).to(device)
                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

                    def epoch():
                        for batch, structure in zip(batches, structures):
                            train_step(model, optimizer, batch, structure, dtype)
                    return graphs / median_ms(epoch, device, args.repeats, args.warmup) * 1e3
                rates.append(attempt(rate))
            rows.append([precision, size, compiled.num_blocks,
                         f"{compiled.kept_fraction():.2%}", *rates, ratio(rates[1], rates[0])])
    print(f"\n### GGNN training, sparse vs banded (graphs/s; H={hidden}, T={steps}, "
          f"N={slots} slots)\n")
    table(["precision", "S", "K", "edges kept", "sparse graphs/s", "banded graphs/s",
           "banded / sparse"], rows)


# ----------------------------------------------------------------------------- gin


def gin_section(args, device, gpu) -> None:
    from end_to_end import moses_tpsa

    from gnnforge.data import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS
    from gnnforge.nn import MoleculeGIN
    from gnnforge.packing import StaticBatch
    from gnnforge.train import PackedSplit
    from gnnforge.train._compile import CompiledLoss

    graphs = moses_tpsa(200 if args.cpu_dry_run else 20_000)
    torch.manual_seed(0)
    ours = MoleculeGIN(ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, hidden=64, num_layers=3)
    packed = PackedSplit(graphs, range(len(graphs)), 128, seed=0)
    steps = len(packed.plan(0))
    theirs, reason = _pyg_gin(ours, graphs, steps, device)
    ours = ours.to(device)
    # `gnnforge train --compile`'s step: each pack a fixed-shape StaticBatch (arrays built
    # on the host, copied over pinned memory), the masked loss under CompiledLoss
    # (fullgraph, dynamic=False: one compile for the one pack shape). The dry run traces
    # the same graphs with aot_eager instead of generating code with inductor.
    step = CompiledLoss(_packed_loss, backend="aot_eager" if args.cpu_dry_run else "inductor")
    our_optimizer = torch.optim.Adam(ours.parameters(), lr=1e-3)

    def our_epoch():
        for number in range(len(packed)):
            batch = StaticBatch.from_batch(packed.batch(number)).to(device)
            loss = step(ours, batch)
            our_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            our_optimizer.step()

    first = attempt(lambda: median_ms(our_epoch, device, 1, 0))  # includes compilation
    epochs = max(1, args.repeats // 5)
    ours_ms = attempt(lambda: median_ms(our_epoch, device, epochs, 1))
    theirs_ms = "skipped" if theirs is None else attempt(
        lambda: median_ms(theirs, device, epochs, 1))
    print(f"\n### MoleculeGIN, {len(graphs)} MOSES molecules, {steps} steps per epoch "
          f"(ms per epoch)\n")
    table(["gnnforge packed + CompiledLoss", "first epoch incl. compile",
           "PyG DataLoader (eager)", "PyG / gnnforge"],
          [[ours_ms, first, theirs_ms, ratio(theirs_ms, ours_ms)]])
    print(f"\n{step.report()}")
    if theirs is None:
        print(f"\nPyG column skipped: {reason}")


def _packed_loss(model: torch.nn.Module, batch) -> torch.Tensor:
    """Mean squared error over the pack's real graphs, masked: no data-dependent shapes."""
    mask = batch.graph_mask.unsqueeze(1)                                     # [B, 1]
    return (((model(batch) - batch.graph_data["y"]) ** 2) * mask).sum() / mask.sum()


def _pyg_gin(ours: torch.nn.Module, graphs, steps: int, device) -> tuple[Callable | None, str]:
    """(one eager epoch of the same model in PyG, its DataLoader making `steps` batches,
    "") or (None, why PyG cannot run here). Takes `ours`'s weights before it trains."""
    import torch.nn.functional as F

    try:
        from end_to_end import PygMoleculeGIN
        from torch_geometric.data import Data
        from torch_geometric.loader import DataLoader

        theirs = PygMoleculeGIN(ours).to(device)
    except ImportError as error:
        return None, f"torch_geometric does not import ({error})"
    data = [Data(x=g.node_data["x"], edge_index=torch.stack([g.src, g.dst]),
                 edge_attr=g.edge_data["edge_attr"], y=g.graph_data["y"].view(1, 1),
                 num_nodes=g.num_nodes) for g in graphs]
    loader = DataLoader(data, batch_size=-(-len(data) // steps), shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(theirs.parameters(), lr=1e-3)

    def epoch():
        for batch in loader:
            batch = batch.to(device)
            loss = F.mse_loss(theirs(batch), batch.y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return epoch, ""


# ----------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="run every section on the CPU with tiny inputs (plumbing only)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    chosen = args.sections.split(",")
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        print(f"benchmarks/gpu.py: unknown sections {unknown}; choose from {SECTIONS}")
        return 2
    reason = no_gpu_reason()
    if reason is not None and not args.cpu_dry_run:
        print(f"benchmarks/gpu.py: nothing measured, {reason}")
        return 0
    gpu = reason is None and not args.cpu_dry_run
    device = torch.device("cuda" if gpu else "cpu")
    name = torch.cuda.get_device_name(device) if gpu else "CPU dry run (numbers meaningless)"
    print(f"{name}; torch {torch.__version__}, "
          f"triton {_version('triton')}, torch_geometric {_version('torch_geometric')}, "
          f"dgl {'importable' if dgl_module() else 'not importable'}; median of "
          f"{args.repeats} after {args.warmup} warm-up runs, "
          f"{'CUDA-event' if gpu else 'perf_counter'} timing")
    functions = {"spmm": spmm_section, "kernels": kernels_section, "train": train_section,
                 "banded": banded_section, "gin": gin_section}
    for section in chosen:
        try:
            functions[section](args, device, gpu)
        except Exception:  # one section failing must not hide the others
            print(f"\n### {section}: failed\n\n```\n{traceback.format_exc(limit=4)}```")
    return 0


def _version(module: str) -> str:
    if importlib.util.find_spec(module) is None:
        return "not installed"
    try:
        return getattr(importlib.import_module(module), "__version__", "?")
    except ImportError as error:  # installed but broken: the sections say what they skip
        return f"not importable ({error})"


if __name__ == "__main__":
    sys.exit(main())
