"""Start P local processes with a gloo process group, with timeouts that surface failures.

`spawn` is for tests, benchmarks and notebooks on one machine; on a cluster, launch with
`torchrun` and call `init_from_env` instead. Both meet in a rendezvous with its own
timeout (`_rendezvous`: a rank that never joins is named within 120 s by default) and set
a collective timeout, so a process whose peer died or hangs raises (see `PeerError`)
instead of waiting forever.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gnnforge.distributed._rendezvous import join

__all__ = ["ProcessResult", "free_port", "init_from_env", "spawn"]


@dataclass(frozen=True)
class ProcessResult:
    """What one process returned: `value`, or `error`: a formatted traceback, or one line
    saying that it timed out (`timed_out`) or died without reporting."""

    rank: int
    value: Any = None
    error: str | None = None
    exitcode: int | None = None
    timed_out: bool = False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_backend() -> str:
    """The process-group backend by tensor device: the collectives follow the tensors.

    gloo alone without CUDA; with CUDA, 'cpu:gloo,cuda:nccl', so CUDA tensors (DDP
    gradients, embedding exchanges on the GPU) go through NCCL while CPU tensors (the
    cooperative sampler's id exchanges, gathered RNG states) go through gloo. NCCL alone
    would fail on the CPU ones.
    """
    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


def init_from_env(timeout_s: float = 60.0, backend: str | None = None,
                  rendezvous_timeout_s: float | None = None) -> None:
    """init_process_group from torchrun's environment (MASTER_ADDR, MASTER_PORT, RANK,
    WORLD_SIZE) with a collective timeout.

    Args:
        timeout_s: the process group's timeout for each collective.
        backend: a torch.distributed backend string (default `default_backend()`: gloo
            for CPU tensors, and NCCL for CUDA tensors when CUDA is available).
        rendezvous_timeout_s: how long to wait for every rank to join (default
            $GNNFORGE_RENDEZVOUS_TIMEOUT, else 120 s); see `_rendezvous.join`.

    Raises:
        PeerError: naming the ranks that did not join in time.
        KeyError: naming a missing environment variable.
    """
    backend = backend or default_backend()
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
               if name not in os.environ]
    if missing:
        raise KeyError(f"init_from_env: environment variables {missing} are not set "
                       "(launch with torchrun, or set them)")
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = join(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), rank, world_size,
                 rendezvous_timeout_s)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _child(rank: int, world_size: int, port: int, fn: Callable, args: tuple,
           collective_timeout_s: float, rendezvous_timeout_s: float | None, results) -> None:
    torch.set_num_threads(1)  # P processes share the machine's cores
    try:
        store = join("127.0.0.1", port, rank, world_size, rendezvous_timeout_s)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=collective_timeout_s))
        value = fn(rank, world_size, *args)
        # Plain pickle bytes: a queue would share tensors through file descriptors that
        # vanish when this process exits before the parent reads them.
        results.put(ProcessResult(rank, value=pickle.dumps(value)))
    except BaseException:  # report everything to the parent, which re-raises
        results.put(ProcessResult(rank, error=traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn: Callable, world_size: int, args: tuple = (), timeout_s: float = 120.0,
          collective_timeout_s: float = 30.0,
          rendezvous_timeout_s: float | None = None) -> list[ProcessResult]:
    """Run fn(rank, world_size, *args) in `world_size` new processes on one gloo group.

    Args:
        fn: a module-level (picklable) function; its return value must be picklable.
        world_size: number of processes.
        timeout_s: wall-clock limit for the whole run; processes still alive are killed.
        collective_timeout_s: the process group's timeout for each collective.
        rendezvous_timeout_s: how long the processes wait for each other to join (default
            $GNNFORGE_RENDEZVOUS_TIMEOUT, else 120 s).

    Returns:
        one ProcessResult per rank, in rank order. A rank still running at the deadline
        is killed and has `timed_out` set and an error saying so; one that died without
        reporting has an error naming its exit code. `error is None` means it returned.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    # A fork server that has imported torch once makes each later start cheap (importing
    # torch costs seconds on a loaded machine), and forks from a single-threaded server.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch.distributed", "gnnforge.sampling",
                                    "gnnforge.distributed"])
    results = context.Queue()
    port = free_port()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    processes = [context.Process(target=_child, args=(rank, world_size, port, fn, args,
                                                       collective_timeout_s,
                                                       rendezvous_timeout_s, results))
                 for rank in range(world_size)]
    for process in processes:
        process.start()
    reported: dict[int, ProcessResult] = {}
    deadline = time.monotonic() + timeout_s
    while len(reported) < world_size and time.monotonic() < deadline:
        try:
            result = results.get(timeout=0.2)
            reported[result.rank] = result
        except queue.Empty:
            alive = [p for r, p in enumerate(processes) if r not in reported and p.is_alive()]
            if not alive:
                break
    timed_out = set()
    for rank, process in enumerate(processes):
        process.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
        if process.is_alive():
            process.kill()
            process.join()
            timed_out.add(rank)
    return [_result(rank, reported.get(rank), process.exitcode, rank in timed_out, timeout_s)
            for rank, process in enumerate(processes)]


def _result(rank: int, reported: ProcessResult | None, exitcode: int | None, killed: bool,
            timeout_s: float) -> ProcessResult:
    """The parent's record of one rank: what it reported, else why it did not."""
    if reported is not None:
        return ProcessResult(rank, _loads(reported.value), reported.error, exitcode)
    if killed:
        return ProcessResult(rank, error=f"rank {rank} timed out: still running after "
                             f"spawn(timeout_s={timeout_s:g}); it was killed", exitcode=exitcode,
                             timed_out=True)
    return ProcessResult(rank, error=f"rank {rank} exited with code {exitcode} without "
                         "reporting a value or an error", exitcode=exitcode)


def _loads(value: bytes | None) -> Any:
    return None if value is None else pickle.loads(value)
