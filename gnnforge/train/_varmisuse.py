"""VarMisuse: GGNN encoder + linear readout over candidate nodes, trained sparse or banded.

The model embeds each node's label and role, runs `GGNNConv` for T steps and scores
every candidate node with one linear layer; a softmax over each example's candidates gives
the prediction. One set of parameters runs on either backend, so a model trained with
banded propagation (RCM-reordered supergraphs, out-of-band edges dropped) is evaluated on
all edges with sparse propagation, as in "Fast Training of Sparse Graph Neural Networks on
Dense Hardware". Baselines: the same model with T=0 (no propagation: a prior over
candidate names) and chance (mean of 1/candidates).

Data parallel: under ``torchrun`` (WORLD_SIZE > 1) the model is wrapped in DDP (gloo on
CPU, NCCL on GPU) and each process takes every WORLD_SIZE-th training batch. Run
``python -m gnnforge.train.varmisuse_main --help``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from tqdm.auto import tqdm

from gnnforge._device import use_process_device
from gnnforge.banded import BandedBlocks, compile_blocks, compile_dataset, supergraph_batch
from gnnforge.data import program_graphs
from gnnforge.distributed import default_backend
from gnnforge.graph import GraphBatch
from gnnforge.nn import GGNNConv
from gnnforge.train._compile import CompiledLoss
from gnnforge.train._varmisuse_data import (
    ROLE_CANDIDATE,
    VARMISUSE_EDGE_TYPES,
    split_by_file,
    varmisuse_examples,
)
from gnnforge.train._varmisuse_static import (
    SparsePad,
    banded_inputs,
    move_inputs,
    sparse_inputs,
    static_candidate_loss,
)
from gnnforge.train._xla_meter import XlaMeter

__all__ = ["VarMisuseConfig", "VarMisuseModel", "candidate_loss", "evaluate", "format_results",
           "run_varmisuse"]

BACKENDS = ("sparse", "banded")


@dataclass
class VarMisuseConfig:
    """Options of a VarMisuse run; the defaults take a few minutes on 2 CPU cores."""

    root: str | None = None  # corpus directory; None: the interpreter's standard library
    max_files: int | None = 30  # a few minutes on 2 cores; None parses every file
    max_per_graph: int = 3  # holes per function: more examples, more correlated
    max_nodes: int = 1000  # examples larger than this after pruning are skipped (counted)
    hidden: int = 64  # H; the benchmark uses 128
    num_steps: int = 4  # T; pruning uses the same T
    backends: tuple[str, ...] = BACKENDS  # one model trained per backend
    baseline: bool = True  # also train the T=0 model
    block_size: int = 256  # S for banded training
    num_slots: int = 1024  # nodes per batch (a supergraph of num_slots / S blocks)
    epochs: int = 3
    lr: float = 3e-3
    seed: int = 0  # data: hole sampling and the file split
    model_seed: int | None = None  # initialisation and batch order; None: same as seed
    progress: bool = True
    threads: int = 1  # torch threads per process (the CLI applies it); more thrash a shared CPU
    # Where the models train and evaluate ('cpu', 'cuda', 'cuda:N', 'xla'): batches are
    # assembled on the CPU, moved there, and banded blocks are built there from the moved
    # batch. On XLA blocks are built on the CPU, sparse batches padded to one size, and
    # every step is the masked all-slot loss (`_varmisuse_static`); results gain "xla".
    device: str = "cpu"
    # Train the banded model's step under torch.compile(fullgraph=True, dynamic=False): the
    # loss over all K*S slots, masked (`_varmisuse_static`); results gain "compile" counts.
    compile: bool = False
    sync_file: str | None = None  # DDP test hook: each rank saves its parameters here (+rank)


class VarMisuseModel(nn.Module):
    """Label + role embedding, GGNN encoder, linear score per candidate node.

    Args:
        num_labels: vocabulary size + 1 (the hole label).
        hidden: H.
        num_steps: T (0: no propagation).
        num_edge_types: P (16 for VarMisuse graphs).
    """

    def __init__(self, num_labels: int, hidden: int, num_steps: int,
                 num_edge_types: int = len(VARMISUSE_EDGE_TYPES)) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_labels, hidden)
        self.role = nn.Embedding(3, hidden)
        self.encoder = GGNNConv(hidden, num_steps, num_edge_types)
        # No bias: a softmax over candidates ignores a shared shift, so its gradient is
        # rounding noise that Adam would scale up to full-size steps.
        self.readout = nn.Linear(hidden, 1, bias=False)

    def forward(self, batch: GraphBatch, structure: GraphBatch | BandedBlocks) -> Tensor:
        """Scores [C] of the batch's candidate nodes (in node order)."""
        data = batch.node_data
        h = self.encoder(self.embed(data["label"]) + self.role(data["role"]), structure)
        return self.readout(h[data["role"] == ROLE_CANDIDATE]).squeeze(-1)


def candidate_loss(scores: Tensor, batch: GraphBatch) -> tuple[Tensor, int, int]:
    """Mean cross-entropy of a softmax over each example's candidates.

    Returns:
        (loss, number correct, number of examples) of the real graphs in `batch`.
    """
    candidates = batch.node_data["role"] == ROLE_CANDIDATE
    group = batch.node_graph[candidates]  # [C] example of each candidate
    target = batch.node_data["target"][candidates].bool()
    count = batch.num_graphs
    top = scores.new_full((count,), float("-inf")).scatter_reduce(0, group, scores.detach(), "amax")
    total = scores.new_zeros(count).index_add(0, group, torch.exp(scores - top[group]))
    logsumexp = torch.log(total[group[target]]) + top[group[target]]
    loss = (logsumexp - scores[target]).mean()
    correct = int((scores[target].detach() >= top[group[target]]).sum())
    return loss, correct, int(target.sum())


def _batches(compiled, indices: list[int]):
    return [supergraph_batch([compiled.graphs[i] for i in compiled.supergraphs[g]],
                             compiled.num_slots) for g in indices]


def _structure(batch: GraphBatch, backend: str, compiled) -> GraphBatch | BandedBlocks:
    """The batch itself (sparse) or its banded blocks, built on the batch's device."""
    if backend == "sparse":
        return batch
    return compile_blocks(batch, compiled.block_size, compiled.num_edge_types, compiled.num_blocks)


def _on(batch: GraphBatch, device: torch.device) -> GraphBatch:
    return batch if batch.device == device else batch.to(device)


def evaluate(model: nn.Module, batches: list[GraphBatch], backend: str,
             compiled, progress: bool = False, desc: str = "evaluate",
             pad: SparsePad | None = None, meter: XlaMeter | None = None) -> tuple[float, float]:
    """(accuracy, chance accuracy) over the CPU `batches`, run on the model's device; NaN
    for an empty split. On XLA (`meter` given) each batch is one static graph (`pad`: the
    sparse padding size), and the hit counts are read once, at the end."""
    hits = torch.zeros(2, dtype=torch.int64)
    chance = 0.0
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        for batch in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
            if meter is None:
                moved = _on(batch, device)
                _, correct, count = candidate_loss(model(moved, _structure(moved, backend,
                                                                           compiled)), moved)
                hits += torch.tensor([correct, count])
            else:
                inputs = _static_inputs(batch, backend, compiled, pad)
                _, correct, count = static_candidate_loss(model, *move_inputs(inputs, device))
                hits = hits.to(device) + torch.stack([correct, count])
                meter.sync()
            chance += _chance(batch)
    correct, total = (int(v) for v in hits.cpu())
    if total == 0:
        return float("nan"), float("nan")  # an empty split (tiny corpora) has no accuracy
    return correct / total, chance / total


def _chance(batch: GraphBatch) -> float:
    """Sum over the batch's real examples of 1 / candidates (on the CPU batch)."""
    per_graph = torch.bincount(batch.node_graph[batch.node_data["role"] == ROLE_CANDIDATE],
                               minlength=batch.num_graphs)[batch.graph_mask].double()
    return float((1.0 / per_graph).sum())


def _static_inputs(batch: GraphBatch, backend: str, compiled, pad: SparsePad | None) -> tuple:
    """The static loss's arguments, on the CPU: banded blocks built here, or the batch
    padded to `pad`."""
    if backend == "sparse":
        return sparse_inputs(batch, pad)
    return banded_inputs(batch, _structure(batch, backend, compiled))


def _train(config: VarMisuseConfig, num_labels: int, num_steps: int, backend: str,
           compiled, train_ids: list[int], rank: int, world: int, device: torch.device,
           step: CompiledLoss | None = None, pad: SparsePad | None = None,
           meter: XlaMeter | None = None) -> nn.Module:
    """One model trained on `backend` on `device` (this process's: under torchrun,
    cuda:LOCAL_RANK); with `step`, each banded step runs compiled; with `meter` (XLA), each
    step is the static loss on inputs built on the CPU (`pad`: the sparse padding size)."""
    seed = config.seed if config.model_seed is None else config.model_seed
    torch.manual_seed(seed)
    model = VarMisuseModel(num_labels, config.hidden, num_steps).to(device)
    if world > 1:  # NCCL all-reduces on the rank's own GPU, gloo on the CPU
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=None if device.index is None else [device.index],
            find_unused_parameters=num_steps == 0)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(seed)
    per_rank = len(train_ids) // world  # equal step counts keep the DDP processes in lockstep
    for epoch in range(config.epochs):
        order = torch.randperm(len(train_ids), generator=generator)[: per_rank * world]
        mine = [train_ids[int(i)] for i in order[rank::world]]
        bar = tqdm(mine, desc=f"{backend} T={num_steps} epoch {epoch + 1}", unit="batch",
                   disable=not config.progress or rank != 0)
        shown_at = float("-inf")
        for group in bar:
            (batch,) = _batches(compiled, [group])
            model.train()
            if meter is not None:
                inputs = move_inputs(_static_inputs(batch, backend, compiled, pad), device)
                loss, _, _ = static_candidate_loss(model, *inputs)
            else:
                batch = _on(batch, device)
                structure = _structure(batch, backend, compiled)
                if step is not None:
                    loss, _, _ = step(model, *banded_inputs(batch, structure))
                else:
                    loss, _, _ = candidate_loss(model(batch, structure), batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if meter is not None:
                meter.sync()
            shown_at = _show_loss(bar, loss, shown_at)
    return model.module if world > 1 else model


# Reading the loss is a host sync (a GPU stops running ahead of the loop): the bar shows it
# at most once a second, and not at all when the bar is off.
_BAR_PERIOD_S = 1.0


def _show_loss(bar, loss: Tensor, shown_at: float) -> float:
    """Put the step's loss on the bar when it is shown and a period has passed since the
    last read; returns the time of the last read."""
    now = time.monotonic()
    if bar.disable or now - shown_at < _BAR_PERIOD_S:
        return shown_at
    # Through .cpu(): on XLA, .item() is an `aten::_local_scalar_dense` CPU fallback.
    bar.set_postfix(loss=f"{float(loss.detach().cpu()):.3f}")
    return now


def _compile_splits(config: VarMisuseConfig, examples, splits):
    compiled = {}
    for name, ids in zip(("train", "valid", "test"), splits):
        graphs = [examples.graphs[i] for i in ids]
        compiled[name] = compile_dataset(graphs, config.block_size,
                                         config.num_slots // config.block_size,
                                         num_edge_types=len(VARMISUSE_EDGE_TYPES),
                                         progress=config.progress)
    return compiled


def run_varmisuse(config: VarMisuseConfig) -> dict:
    """Build the data, train one model per backend (and the T=0 baseline), evaluate sparse.

    Returns:
        dict with ``rows`` (one per trained model: backend, T, valid/test accuracy with
        sparse evaluation, and with banded evaluation), ``chance`` (valid, test), the data
        reports and the seconds taken.
    """
    for backend in config.backends:
        if backend not in BACKENDS:
            raise ValueError(f"VarMisuse: backend must be one of {BACKENDS}, got {backend!r}")
    # Before any work: a one-line error without CUDA. Under torchrun each process takes
    # its own GPU (cuda means cuda:LOCAL_RANK), made current for NCCL and the kernels.
    device = use_process_device(config.device)
    if config.compile and config.backends != ("banded",):
        raise ValueError(f"VarMisuse: compile runs the banded step (fixed K*S slots); pass "
                         f"backends=('banded',), got {config.backends}")
    if config.num_slots % config.block_size:
        raise ValueError(f"VarMisuse: num_slots ({config.num_slots}) must be a multiple of "
                         f"block_size ({config.block_size})")
    rank, world = _distributed()
    start = time.perf_counter()
    corpus = program_graphs(config.root, max_files=config.max_files, progress=config.progress)
    examples = varmisuse_examples(corpus, config.num_steps, config.max_per_graph,
                                  config.max_nodes, config.seed, config.progress)
    compiled = _compile_splits(config, examples, split_by_file(examples.graphs, seed=config.seed))
    batches = {name: _batches(c, list(range(len(c.supergraphs)))) for name, c in compiled.items()}
    runs = [(backend, config.num_steps) for backend in config.backends]
    if config.baseline:
        runs.append(("sparse", 0))
    rows = []
    step = CompiledLoss(static_candidate_loss) if config.compile else None
    lazy = device.type == "xla"
    pad = _sparse_pad(compiled, config.num_slots) if lazy else None
    meter = XlaMeter() if lazy else None
    for backend, steps in runs:
        mark = None if meter is None else meter.mark()
        model = _train(config, examples.num_labels, steps, backend, compiled["train"],
                       list(range(len(compiled["train"].supergraphs))), rank, world, device,
                       step if backend == "banded" and steps == config.num_steps else None,
                       pad, meter)
        row = dict(train_backend=backend, num_steps=steps)
        if meter is not None:  # the training loop's own counts
            row["xla_train"] = meter.counts(since=mark)
        show = config.progress and rank == 0
        for name in ("valid", "test"):
            for kind in ("sparse", "banded"):
                row[f"{name}_{kind}"], _ = evaluate(
                    model, batches[name], kind, compiled[name], show,
                    f"{backend} T={steps}: {name} accuracy, {kind} propagation", pad, meter)
        rows.append(row)
        if config.sync_file and backend == config.backends[0] and steps == config.num_steps:
            _save_parameters(model, f"{config.sync_file}.rank{rank}")
    chance = tuple(_chance_accuracy(batches[n]) for n in ("valid", "test"))
    counts = None if step is None else dict(zip(("frames", "graph_breaks", "recompiles"),
                                                  step.counts()))
    return dict(rows=rows, chance=chance, corpus=corpus.report(), examples=examples.report(),
                compile=counts,
                compiled={n: c.report() for n, c in compiled.items()},
                sizes={n: sum(len(g) for g in c.supergraphs) for n, c in compiled.items()},
                seconds=time.perf_counter() - start, world_size=world, config=asdict(config),
                xla=None if meter is None else meter.counts(),
                sparse_pad=None if pad is None else asdict(pad))


def _sparse_pad(compiled: dict, num_slots: int) -> SparsePad:
    """One padding size for every sparse batch of every split (one XLA shape)."""
    edges, graphs = [], []
    for dataset in compiled.values():
        for members in dataset.supergraphs:
            edges.append(sum(dataset.graphs[i].num_edges for i in members))
            graphs.append(len(members) + 1)  # supergraph_batch's own padding graph
    return SparsePad.covering(num_slots, edges, graphs)


def _chance_accuracy(batches: list[GraphBatch]) -> float:
    """Mean of 1 / candidates over the batches' examples; NaN when there are none, as
    `evaluate` says for an empty split."""
    examples = sum(int(batch.node_data["target"].sum()) for batch in batches)
    return sum(map(_chance, batches)) / examples if examples else float("nan")


def _distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(default_backend())  # gloo for CPU tensors, NCCL for CUDA
    return (dist.get_rank(), dist.get_world_size()) if world > 1 else (0, 1)


def _save_parameters(model: nn.Module, path: str) -> None:
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, path)


def format_results(results: dict) -> str:
    """Markdown table of accuracies (sparse evaluation on all edges, and banded) and chance."""
    lines = ["| trained | T | valid acc (sparse eval) | test acc (sparse eval) | "
             "valid acc (banded eval) | test acc (banded eval) |", "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        lines.append(f"| {row['train_backend']} | {row['num_steps']} | {row['valid_sparse']:.4f} | "
                     f"{row['test_sparse']:.4f} | {row['valid_banded']:.4f} | "
                     f"{row['test_banded']:.4f} |")
    valid, test = results["chance"]
    lines.append(f"| chance (1/candidates) | - | {valid:.4f} | {test:.4f} | - | - |")
    return "\n".join(lines)
