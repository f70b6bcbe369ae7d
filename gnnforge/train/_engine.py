"""The training loop shared by every task: steps, evaluation, checkpoints, resume, logs.

A task supplies the data and the model (see `Task`); this loop owns the optimiser, the
random state and the files. Resuming is exact because everything a step depends on is a
function of what the checkpoint holds: the epoch's batch order is drawn from
(seed, epoch), sampler generators and the global RNGs are saved after the last finished
step, and so are the running sums of the epoch's metrics.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from tqdm import tqdm

from gnnforge._device import use_process_device
from gnnforge.train._checkpoint import (CheckpointError, capture_rng, check_out_dir,
                                        load_checkpoint, restore_rng, save_checkpoint)
from gnnforge.train._config import TrainConfig
from gnnforge.train._early_stopping import Standing, judge
from gnnforge.train._log import format_table, write_metrics
from gnnforge.train._lr_schedule import step_lr
from gnnforge.train._workers import step_batches
from gnnforge.train._xla_meter import accumulator_dtype

__all__ = ["Task", "fit"]

CHECKPOINT = "checkpoint.pt"


class Task(Protocol):
    """What a task gives the loop. Batch order must depend only on (seed, epoch).

    Optional attribute `cooperative` (default False): under torch.distributed every
    process takes its share of every batch (`batch(step)` on all ranks, the loss being
    that share of the global loss) and the loop sums gradients instead of using DDP.
    Optional method `parameter_groups(model)`: the optimiser's parameter groups (default:
    every parameter under --weight-decay). `evaluate(model, "val")` may also report
    `val_loss`, which `--early-stopping loss` and `loss-and-metric` read.
    """

    name: str
    metric: str                 # validation metric used for early stopping, e.g. 'val_mae'
    higher_is_better: bool
    items: str                  # what a step trains on: 'graphs' or 'nodes'

    def build_model(self) -> nn.Module: ...
    def start_epoch(self, epoch: int) -> int: ...           # number of batches this epoch
    def batch(self, index: int) -> Any: ...
    def loss(self, model: nn.Module, batch: Any) -> tuple[Tensor, int]: ...
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]: ...
    def epoch_stats(self) -> dict[str, float]: ...
    def describe(self) -> list[tuple[str, Any]]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class _Progress:
    """Where the run stands; saved in every checkpoint."""

    epoch: int = 0
    step: int = 0               # finished steps within `epoch`
    loss_sum: float = 0.0       # sum of (mean batch loss x items) over finished steps
    items: int = 0
    seconds: float = 0.0        # training time spent in `epoch` so far
    best: float | None = None   # the kept epoch's value (see _early_stopping.Standing)
    best_epoch: int = -1
    bad_epochs: int = 0
    stopped_early: bool = False
    best_metric: float | None = None   # records for --early-stopping loss-and-metric
    lowest_loss: float | None = None
    total_steps: int = 0        # finished steps over all epochs (--max-steps)


def init_distributed() -> tuple[int, int]:
    """(rank, world size): an initialised process group's, torchrun's (gloo), or (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    from gnnforge.distributed import init_from_env

    # A generous collective timeout: rank 0 also writes checkpoints and logs between steps.
    # The default backend follows the tensors (gloo for CPU ones, NCCL for CUDA ones).
    init_from_env(timeout_s=600.0)
    return dist.get_rank(), dist.get_world_size()


def finish_distributed() -> None:
    """Leave the process group that `init_distributed` joined, once every process is done.

    Without this, the group and its gloo threads were torn down by the interpreter's exit:
    1 of 8 two-process cooperative CLI runs then aborted after training with "terminate
    called without an active exception".
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _cooperative(task: Task) -> bool:
    """True for a task whose processes share every minibatch (cooperative minibatching)."""
    return bool(getattr(task, "cooperative", False))


def fit(config: TrainConfig, task: Task, *, printer=print) -> dict[str, Any]:
    """Train `task` as `config` says; returns the summary (also written to metrics.json)."""
    rank, world = init_distributed()
    out_dir = Path(config.out_dir)
    if rank == 0:
        check_out_dir(out_dir)  # before the first epoch, not after it
    torch.manual_seed(config.seed)
    device = use_process_device(config.device)  # under torchrun: cuda means cuda:LOCAL_RANK
    model = task.build_model().to(device)  # the task moves its data (--device)
    # A task may split the parameters into groups (the node task's first-layer-only decay).
    groups = getattr(task, "parameter_groups", lambda m: m.parameters())(model)
    optimizer = torch.optim.Adam(groups, lr=config.lr, weight_decay=config.weight_decay)
    progress, history, best_state = _Progress(), [], None
    path = out_dir / CHECKPOINT
    if config.resume and path.exists():
        progress, history, best_state = _resume(path, model, optimizer, task, config,
                                                rank, world)
        if rank == 0:
            printer(f"resumed from {path}: epoch {progress.epoch + 1}, step {progress.step}")
    elif config.resume and rank == 0:
        printer(f"--resume: no checkpoint at {path}; starting from scratch")
    trained = model
    if world > 1 and _cooperative(task):
        _broadcast_parameters(model)  # gradients are all-reduced by hand after each step
    elif world > 1:  # CUDA parameters: gradients all-reduced by NCCL
        trained = nn.parallel.DistributedDataParallel(
            model, device_ids=None if device.index is None else [device.index])
    saver = _Saver(path, model, optimizer, task, config, rank, world)
    _prepare_kernels(device, printer if rank == 0 else (lambda *_: None))
    _plan_model(model, task, printer if rank == 0 else (lambda *_: None))

    while progress.epoch < config.epochs and not progress.stopped_early \
            and not _out_of_steps(config, progress):
        for group in optimizer.param_groups:  # from the epoch alone: resume needs no state
            group["lr"] = step_lr(group.setdefault("initial_lr", group["lr"]),
                                  progress.epoch, config.lr_step_epochs, config.lr_gamma)
        _train_epoch(config, task, trained, optimizer, progress, saver, history, best_state,
                     rank, world)
        row = _finish_epoch(config, task, model, progress, history)
        if progress.best_epoch == progress.epoch:
            best_state = _snapshot(model)
        if rank == 0:
            printer(_epoch_line(row, config.epochs))
        progress.epoch, progress.step = progress.epoch + 1, 0
        progress.loss_sum, progress.items, progress.seconds = 0.0, 0, 0.0
        saver.save(progress, history, best_state)
        if rank == 0:
            write_metrics(out_dir, history)
    summary = _summary(task, model, best_state, progress, history, config)
    compiled = getattr(task, "compiled", None)
    if compiled is not None:  # the counts go to metrics.json and end the output
        summary["compile"] = dict(zip(("frames", "graph_breaks", "recompiles"),
                                      compiled.counts()))
    meter = getattr(task, "xla", None)
    if meter is not None:  # as the compile counts: metrics.json and the last line
        summary["xla"] = meter.counts()
    if rank == 0:
        write_metrics(out_dir, history, summary)
        table = [(k, v) for k, v in summary.items()
                 if k not in ("compile", "xla") and not isinstance(v, list)]
        printer(format_table(table, f"gnnforge train: {task.name}"))
        if compiled is not None:
            printer(compiled.report())
        if meter is not None:
            printer(meter.report())
    return summary


def _out_of_steps(config: TrainConfig, progress: _Progress) -> bool:
    """True once --max-steps optimiser steps have been taken."""
    return config.max_steps is not None and progress.total_steps >= config.max_steps


def _snapshot(model: nn.Module) -> dict[str, Tensor]:
    """A copy of the model's state (the best epoch's weights). On XLA it is read to the
    CPU: a device copy would be recorded lazily and run inside the next training step,
    a graph of its own (one more compile per improving epoch)."""
    state = model.state_dict()
    if any(tensor.device.type == "xla" for tensor in state.values()):
        return {name: tensor.detach().cpu() for name, tensor in state.items()}
    return copy.deepcopy(state)


def _plan_model(model: nn.Module, task: Task, printer) -> None:
    """Fix every planned layer's composition before the first step, and print it.

    Planned by prediction on the task's `plan_graph()` (the full graph, or the blocks of
    a fixed first minibatch), never by timing: a resumed run must take the same plans
    (and so the same float rounding) as an uninterrupted one. A task without a graph to
    plan on keeps PyG's order.
    """
    from gnnforge.plan import optimize, planned_layers

    layers = planned_layers(model)
    if not layers:
        return
    target = getattr(task, "plan_graph", lambda: None)()
    if target is None:
        for _, layer in layers:
            layer.plan = "default"
        printer("planned layers: PyG's order (this task has no fixed graph to plan on)")
        return
    printer(str(optimize(model, target, training=True)))


def _prepare_kernels(device: torch.device, printer) -> None:
    """Compile the native CPU kernels before the first timed step (once per machine):
    otherwise the build lands in the first epoch's training time and steps/s."""
    if device.type != "cpu":
        return
    from gnnforge.ops._native_prepare import prepare_native_kernels

    line = prepare_native_kernels()
    if line is not None:
        printer(line)


def _resume(path: Path, model, optimizer, task: Task, config: TrainConfig, rank: int,
            world: int):
    state = load_checkpoint(path)
    missing = [key for key in _CHECKPOINT_KEYS if key not in state]
    if missing or not isinstance(state["config"], dict):
        raise CheckpointError(f"{path}: not a gnnforge train checkpoint (missing {missing}); "
                              "delete it or use another --out-dir")
    if state["config"].get("task") != config.task or state["config"].get("seed") != config.seed:
        raise ValueError(f"--resume: {path} was written by task={state['config'].get('task')!r}"
                         f" seed={state['config'].get('seed')}, not task={config.task!r} "
                         f"seed={config.seed}; use another --out-dir")
    written = (state.get("world_size", 1),
               state["config"].get("distributed", "independent"))
    if written != (world, config.distributed):
        raise ValueError(f"--resume: {path} was written by {written[0]} process(es) with "
                         f"--distributed {written[1]}, but this run has {world} with "
                         f"--distributed {config.distributed}; the batch assignment would "
                         "differ, so resume with the same launch (or use another --out-dir)")
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        # Each process restores its own task state (epoch counters, feature cache).
        task.load_state_dict(state["task_per_rank"][rank] if "task_per_rank" in state
                             else state["task"])
        # Every process continues its own random streams (dropout masks differ by rank).
        restore_rng(state["rng_per_rank"][rank] if "rng_per_rank" in state else state["rng"])
        return _Progress(**state["progress"]), list(state["history"]), state["best_model"]
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise CheckpointError(f"{path}: does not fit this run ({type(error).__name__}: "
                              f"{reason}); resume with the options that wrote it, or use "
                              "another --out-dir") from error


# What `_Saver.save` writes and `_resume` reads (plus rng or rng_per_rank).
_CHECKPOINT_KEYS = ("model", "optimizer", "progress", "history", "best_model", "task", "config")


class _Saver:
    def __init__(self, path: Path, model, optimizer, task: Task, config: TrainConfig,
                 rank: int, world: int) -> None:
        self.path, self.model, self.optimizer, self.task = path, model, optimizer, task
        self.config, self.rank, self.world = config, rank, world

    def save(self, progress: _Progress, history: list, best_state) -> None:
        """Rank 0 writes; collective when world > 1 (every rank's RNG state is gathered)."""
        rng = capture_rng()
        payload: dict[str, Any] = {}
        if self.world > 1:
            import torch.distributed as dist

            states: list[Any] = [None] * self.world
            dist.all_gather_object(states, (rng, self.task.state_dict()))
            payload["rng_per_rank"] = [rng_state for rng_state, _ in states]
            payload["task_per_rank"] = [task_state for _, task_state in states]
        if self.rank != 0:
            return
        payload.update({
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "progress": dict(progress.__dict__), "history": history,
            "best_model": best_state, "task": self.task.state_dict(), "rng": rng,
            "config": self.config.to_dict(), "world_size": self.world})
        save_checkpoint(self.path, payload)


def _broadcast_parameters(model: nn.Module) -> None:
    import torch.distributed as dist

    for tensor in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(tensor.data, src=0)


def _all_reduce_step(model: nn.Module, loss: Tensor) -> Tensor:
    """Sum gradients and the loss over processes in one collective; returns the summed loss
    (a 0-d tensor, read by `_LossSum` when it is needed).

    Cooperative minibatching: each process's loss is its seeds' share of the global batch
    loss (already divided by the global batch size), so the sums are the global batch's
    loss and gradient, exactly what one process would compute for the whole batch.
    """
    import torch.distributed as dist

    from gnnforge.distributed._exchange import collective

    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads] + [loss.detach().reshape(1).to(grads[0])])
    collective("all_reduce of gradients", lambda: dist.all_reduce(flat))
    offset = 0
    for param, grad in zip(params, grads):
        param.grad = flat[offset:offset + grad.numel()].view_as(grad)
        offset += grad.numel()
    return flat[-1]


class _LossSum:
    """The epoch's sum of (mean batch loss x items), kept on the loss's device.

    Reading a loss (`float(loss)`, `.item()`) waits for every kernel queued before it: once
    per step, that host sync keeps a GPU from running ahead of the Python loop. Here the
    losses are added up detached, in float64, in the order of the steps, which is exactly
    the old host sum `start + loss_1 * items_1 + ...` (float64 products and sums of the
    same values), and read only when a value is needed: at the epoch's end, for a
    checkpoint, and for the progress bar at most once per second. On XLA the sum is
    float32 (TPUs have no float64; `accumulator_dtype`).
    """

    BAR_PERIOD_S = 1.0

    def __init__(self, start: float) -> None:
        self.start = start           # progress.loss_sum when the epoch (re)started
        self.total: Tensor | None = None
        self.shown_at = time.monotonic()

    def add(self, loss: Tensor, items: int) -> None:
        term = loss.detach().to(accumulator_dtype(loss.device)) * items
        if self.total is None:  # a tensor from the start: every step adds the same way
            # (on XLA a `term + float` first step was a graph, and a compile, of its own).
            # [1], copied from the CPU: XLA bakes a 0-d 0.0 or 1.0 into the graph as a
            # constant, and the epoch's first step compiled again.
            self.total = torch.tensor([self.start], dtype=term.dtype).to(term.device)
        self.total = self.total + term

    def value(self) -> float:
        """The sum so far: a host sync when steps were added since the last read."""
        # Through .cpu(): on XLA, .item() is an `aten::_local_scalar_dense` CPU fallback.
        return self.start if self.total is None else self.total.cpu().item()

    def due(self) -> bool:
        """True at most once per BAR_PERIOD_S: time to show the running mean."""
        now = time.monotonic()
        if now - self.shown_at < self.BAR_PERIOD_S:
            return False
        self.shown_at = now
        return True


def _train_epoch(config, task, model, optimizer, progress, saver, history, best_state,
                 rank, world) -> None:
    num_batches = task.start_epoch(progress.epoch)
    shared = _cooperative(task)
    # Independent: rank r takes batches r, r + W, ... (every rank the same number of steps).
    # Cooperative: every rank takes its share of every batch.
    steps = num_batches if shared else num_batches // world
    last = steps if config.max_steps is None else \
        min(steps, progress.step + config.max_steps - progress.total_steps)
    model.train()
    # disable=None lets tqdm hide the bar when stderr is not a terminal (CI logs, pipes).
    quiet = not config.progress or rank != 0
    bar = tqdm(total=last, initial=progress.step, disable=True if quiet else None,
               desc=f"epoch {progress.epoch + 1}/{config.epochs}", unit="step", leave=False)
    losses = _LossSum(progress.loss_sum)
    meter = getattr(task, "xla", None)  # XLA: one graph per step, ended after the update
    batches = step_batches(task.batch, [step if shared else step * world + rank
                                        for step in range(progress.step, last)],
                           config.workers)
    for step in range(progress.step, last):
        start = time.perf_counter()
        batch = next(batches)
        loss, items = task.loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        losses.add(_all_reduce_step(model, loss) if shared and world > 1 else loss, items)
        optimizer.step()
        if meter is not None:
            meter.sync()
        # The next batch is sampled before `batch = ...` rebinds the name: drop this one
        # (blocks, input rows) and the loss's graph first, so only one batch is alive.
        del batch, loss
        progress.items += items
        progress.step = step + 1
        progress.total_steps += 1
        if not bar.disable and losses.due():  # a host sync: counted as training time
            bar.set_postfix(loss=f"{losses.value() / max(progress.items, 1):.4f}")
        progress.seconds += time.perf_counter() - start
        bar.update(1)
        if config.checkpoint_every and progress.step % config.checkpoint_every == 0 \
                and progress.step < steps:
            progress.loss_sum = losses.value()
            saver.save(progress, history, best_state)
        if config.step_delay:
            time.sleep(config.step_delay)
    start = time.perf_counter()
    progress.loss_sum = losses.value()  # waits for the steps' queued kernels: training time
    progress.seconds += time.perf_counter() - start
    bar.close()


def _finish_epoch(config, task, model, progress, history) -> dict[str, Any]:
    # --selection fold-mean: no validation split; every epoch is tested, and the epoch is
    # chosen later, over all the folds' curves (gnnforge/train/_fold_mean.py).
    fold_mean = config.selection == "fold-mean"
    metrics = task.evaluate(model, "test" if fold_mean else "val")
    row = {"epoch": progress.epoch + 1,
           "train_loss": progress.loss_sum / max(progress.items, 1),
           **metrics, **task.epoch_stats(),
           "train_seconds": progress.seconds,
           f"{task.items}_per_s": progress.items / max(progress.seconds, 1e-9),
           **({"lr": _epoch_lr(config, progress.epoch)} if config.lr_step_epochs else {})}
    history.append(row)
    if fold_mean:  # the weights tested at the end are the last epoch's
        progress.best, progress.best_epoch = None, progress.epoch
        return row
    standing = Standing(progress.best, progress.best_epoch, progress.best_metric,
                        progress.lowest_loss, progress.bad_epochs)
    judge(config.early_stopping, standing, progress.epoch, metrics[task.metric],
          metrics.get("val_loss"), task.higher_is_better)
    progress.best, progress.best_epoch = standing.kept, standing.kept_epoch
    progress.best_metric, progress.lowest_loss = standing.best_metric, standing.lowest_loss
    progress.bad_epochs = standing.bad_epochs
    if config.patience and progress.bad_epochs >= config.patience:
        progress.stopped_early = True
    return row


def _epoch_lr(config: TrainConfig, epoch: int) -> float:
    """The learning rate of 0-based `epoch` (--lr, --lr-step-epochs, --lr-gamma)."""
    return step_lr(config.lr, epoch, config.lr_step_epochs, config.lr_gamma)


def _epoch_line(row: dict[str, Any], epochs: int) -> str:
    parts = [f"epoch {row['epoch']:>3}/{epochs}"]
    for key, value in row.items():
        if key != "epoch":
            parts.append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return "  ".join(parts)


def _summary(task: Task, model, best_state, progress: _Progress, history: list,
             config: TrainConfig) -> dict[str, Any]:
    if best_state is not None:
        model.load_state_dict(best_state)
    test = task.evaluate(model, "test")
    seconds = sum(row["train_seconds"] for row in history)
    items = sum(row[f"{task.items}_per_s"] * row["train_seconds"] for row in history)
    summary: dict[str, Any] = {name: value for name, value in task.describe()}
    if config.selection == "fold-mean":
        # Every epoch's test score is in the history; the seeds runner picks the epoch.
        chosen = {"epochs run": len(history), "stopped early": "no",
                  "best epoch": progress.best_epoch + 1,
                  **{f"final {k} (last epoch)": v for k, v in test.items()}}
        curves = {f"{k} per epoch": [row[k] for row in history] for k in test}
    else:
        chosen = {
            "epochs run": len(history),
            "stopped early": "yes" if progress.stopped_early else "no",
            "best epoch": progress.best_epoch + 1,
            f"best {'val_loss' if config.early_stopping == 'loss' else task.metric}":
                progress.best,
            **{f"final {k} (best epoch)": v for k, v in test.items()}}
        curves = {}
    summary.update({**chosen, "train time (s)": seconds,
                    f"{task.items}/s (train)": items / max(seconds, 1e-9), **curves})
    stats = [row for row in history]
    for key in task.epoch_stats():
        summary[key] = sum(r[key] for r in stats) / max(len(stats), 1)
    return summary
