"""All-to-all exchanges of ids and embeddings, differentiable, with clear peer failures.

gloo on CPU implements `all_to_all_single` with uneven splits in torch 2.13 (checked; the
list form `all_to_all` works too), so both ids and rows travel by `all_to_all_single`:
first the per-peer counts, then the payload. NCCL runs the same calls on GPU: under a
'cpu:gloo,cuda:nccl' process group the backend follows the tensors, so ids and feature
rows (CPU, from the samplers) go through gloo and embeddings of a model on a GPU through
NCCL. `exchange_rows_async` issues a feature-row exchange with `async_op=True` and lets the
caller go on (sampling the next minibatch) until it needs the rows.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from gnnforge import _device

__all__ = ["ExchangePlan", "PeerError", "PendingRows", "Traffic", "all_to_all_ids", "exchange",
           "exchange_rows_async", "traffic"]

T = TypeVar("T")


class Traffic:
    """Bytes this process sent to / received from other processes through `all_to_all`.

    Counts every exchange of this module (ids, feature rows, embeddings, gradients) on
    every process group; rows a process sends to itself are not counted. Thread-safe:
    a prefetching thread samples while the main thread exchanges embeddings.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.sent_bytes = 0
            self.received_bytes = 0

    def add(self, sent: int, received: int) -> None:
        with self._lock:
            self.sent_bytes += sent
            self.received_bytes += received

    @property
    def exchanged_bytes(self) -> int:
        return self.sent_bytes + self.received_bytes


_TRAFFIC = Traffic()


def traffic() -> Traffic:
    """This process's `Traffic` counter (reset it with `traffic().reset()`)."""
    return _TRAFFIC


class PeerError(RuntimeError):
    """A collective failed: a peer process died, or did not answer within the timeout."""


def collective(what: str, call: Callable[[], T]) -> T:
    """Run a torch.distributed call; turn a backend failure into a PeerError that says so."""
    try:
        return call()
    except RuntimeError as error:  # gloo raises RuntimeError / DistBackendError
        rank = dist.get_rank() if dist.is_initialized() else -1
        raise PeerError(
            f"rank {rank}: {what} failed: a peer process died or did not answer within the "
            f"process group timeout (set with init_process_group(timeout=...)). "
            f"Backend said: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        ) from error


def all_to_all_rows(rows: Tensor, send_counts: list[int], recv_counts: list[int], what: str,
                    group=None) -> Tensor:
    """Rows grouped by receiver (send_counts[q] to process q) -> rows grouped by sender."""
    out, _ = _start_rows(rows, send_counts, recv_counts, what, group, async_op=False)
    return out


def _start_rows(rows: Tensor, send_counts: list[int], recv_counts: list[int], what: str,
                group, async_op: bool) -> tuple[Tensor, object]:
    """Issue the all_to_all of `rows`; (the output buffer, the Work handle when async)."""
    out = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    work = collective(what, lambda: dist.all_to_all_single(
        out, rows.contiguous(), recv_counts, send_counts, group=group, async_op=async_op))
    rank = dist.get_rank(group)
    row_bytes = math.prod(rows.shape[1:]) * rows.element_size()
    _TRAFFIC.add((sum(send_counts) - send_counts[rank]) * row_bytes,
                 (sum(recv_counts) - recv_counts[rank]) * row_bytes)
    return out, work


def all_to_all_ids(chunks: list[Tensor], what: str = "all_to_all of vertex ids",
                   group=None) -> list[Tensor]:
    """Send chunks[q] to process q of `group`; return what each sent here, by sender rank."""
    world = dist.get_world_size(group)
    if len(chunks) != world:
        raise ValueError(f"all_to_all_ids: need one chunk per process ({world}), got {len(chunks)}")
    send_counts = torch.tensor([c.numel() for c in chunks], dtype=torch.int64)
    recv_counts = torch.empty(world, dtype=torch.int64)
    collective(what + " (counts)", lambda: dist.all_to_all_single(recv_counts, send_counts,
                                                                  group=group))
    payload = torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.int64)
    received = all_to_all_rows(payload, send_counts.tolist(), recv_counts.tolist(), what,
                               group)
    return list(received.split(recv_counts.tolist()))


@dataclass(frozen=True)
class ExchangePlan:
    """Who sends which rows to whom before one layer; kept from sampling and reused.

    Attributes:
        recv_order: [n_src] int64; the rows arriving (concatenated by sender rank) are the
            block's source rows recv_order[0], recv_order[1], ...
        recv_counts: rows arriving from each process (this process's requests to it).
        send_index: [m] int64 local rows (of this process's owned rows) to send, grouped
            by receiver rank.
        send_counts: rows sent to each process.
    """

    recv_order: Tensor
    recv_counts: list[int]
    send_index: Tensor
    send_counts: list[int]

    @property
    def num_src(self) -> int:
        return int(self.recv_order.numel())

    def to(self, device: torch.device) -> ExchangePlan:
        """The plan with its index tensors on `device`, where the embeddings it moves live
        (the counts are Python lists: all_to_all takes its split sizes on the host)."""
        return ExchangePlan(_device.to_device(self.recv_order, device), self.recv_counts,
                            _device.to_device(self.send_index, device), self.send_counts)

    def remote_rows(self, rank: int) -> tuple[int, int]:
        """(rows sent to other processes, rows received from them)."""
        sent = sum(c for q, c in enumerate(self.send_counts) if q != rank)
        received = sum(c for q, c in enumerate(self.recv_counts) if q != rank)
        return sent, received


class _Exchange(torch.autograd.Function):
    """Forward: owners' rows -> the block's source rows. Backward: the reverse exchange."""

    @staticmethod
    def forward(ctx, x: Tensor, plan: ExchangePlan, group) -> Tensor:
        ctx.plan, ctx.group = plan, group
        ctx.num_rows = x.shape[0]
        arrived = all_to_all_rows(x[plan.send_index], plan.send_counts, plan.recv_counts,
                                  "all_to_all of embeddings (forward)", group)
        out = x.new_empty((plan.num_src, *x.shape[1:]))
        out[plan.recv_order] = arrived
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        plan = ctx.plan
        back = all_to_all_rows(grad_out[plan.recv_order], plan.recv_counts, plan.send_counts,
                               "all_to_all of gradients (backward)", ctx.group)
        grad = grad_out.new_zeros((ctx.num_rows, *grad_out.shape[1:]))
        grad.index_add_(0, plan.send_index, back)  # a row sent to several peers sums them
        return grad, None, None


def exchange(x: Tensor, plan: ExchangePlan, group=None) -> Tensor:
    """Rows of the block's sources from the owners' rows `x` ([n_owned, ...]), with autograd.

    `group`: the process group the plan was made on (None: the default group).
    """
    return _Exchange.apply(x, plan, group)


class PendingRows:
    """The block's source rows of an exchange in flight (`exchange_rows_async`); `wait`
    gives them, in the order `exchange` would."""

    def __init__(self, arrived: Tensor, work, plan: ExchangePlan, what: str) -> None:
        self._arrived, self._work, self._plan, self._what = arrived, work, plan, what
        self._rows: Tensor | None = None

    def wait(self) -> Tensor:
        """[n_src, ...] rows; blocks until the exchange is done (the first call only).

        Raises:
            PeerError: when a peer died or timed out.
        """
        if self._rows is None:
            collective(self._what, self._work.wait)
            plan, arrived = self._plan, self._arrived
            rows = arrived.new_empty((plan.num_src, *arrived.shape[1:]))
            rows[plan.recv_order] = arrived
            self._rows, self._arrived, self._work = rows, None, None
        return self._rows


def exchange_rows_async(x: Tensor, plan: ExchangePlan, group=None) -> PendingRows:
    """`exchange(x, plan, group)` without autograd, issued with `async_op=True`.

    For rows that need no gradient (input features): the caller goes on with work that
    does not need them (sampling the next minibatch) while they travel. Every process of
    the group must issue it at the same point of its sequence of collectives on `group`.
    """
    what = "all_to_all of feature rows"
    arrived, work = _start_rows(x[plan.send_index], plan.send_counts, plan.recv_counts, what,
                                group, async_op=True)
    return PendingRows(arrived, work, plan, what)
