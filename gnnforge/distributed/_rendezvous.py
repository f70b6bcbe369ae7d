"""Rendezvous with a timeout of its own, naming the ranks that did not join.

`init_process_group` waits for every rank inside its store for the whole collective
timeout (600 s in `gnnforge train`), then fails with a store error that names no rank. So
the processes meet first in a TCPStore of their own: each writes its rank, then waits until
every rank has, for at most the rendezvous timeout (`rendezvous_timeout_s=`, else
$GNNFORGE_RENDEZVOUS_TIMEOUT seconds, else 120 s), and the error names the missing ranks.
The process group is then built on that store with the collective timeout.
"""

from __future__ import annotations

import datetime
import os
import time

import torch.distributed as dist

from gnnforge.distributed._exchange import PeerError

__all__ = ["DEFAULT_RENDEZVOUS_TIMEOUT_S", "join", "rendezvous_timeout"]

DEFAULT_RENDEZVOUS_TIMEOUT_S = 120.0
_VARIABLE = "GNNFORGE_RENDEZVOUS_TIMEOUT"
_HINT = f"set {_VARIABLE}=<seconds> (or rendezvous_timeout_s=) to wait longer"


def rendezvous_timeout(seconds: float | None = None) -> float:
    """`seconds`, else $GNNFORGE_RENDEZVOUS_TIMEOUT, else 120.

    Raises:
        ValueError: when the value is not a number of seconds > 0.
    """
    if seconds is None:
        setting = os.environ.get(_VARIABLE)
        if setting is None:
            return DEFAULT_RENDEZVOUS_TIMEOUT_S
        try:
            seconds = float(setting)
        except ValueError:
            seconds = float("nan")
        if not seconds > 0:
            raise ValueError(f"{_VARIABLE} must be a number of seconds > 0, got {setting!r}")
    if not seconds > 0:
        raise ValueError(f"rendezvous_timeout_s must be > 0, got {seconds}")
    return float(seconds)


def join(address: str, port: int, rank: int, world_size: int,
         timeout_s: float | None = None) -> dist.Store:
    """Meet the other `world_size - 1` ranks at address:port; return the shared store.

    Rank 0 hosts the store, unless torchrun's agent already does (TORCHELASTIC_USE_AGENT_STORE).

    Raises:
        PeerError: naming the ranks that did not join within the timeout, or rank 0 when
            its store could not be reached or went away.
    """
    timeout = rendezvous_timeout(timeout_s)
    where = f"{address}:{port}"
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    try:
        store = dist.TCPStore(address, port, world_size=world_size,
                              is_master=rank == 0 and not agent,
                              timeout=datetime.timedelta(seconds=timeout),
                              wait_for_workers=False, multi_tenant=True)
    except (RuntimeError, OSError) as error:  # DistNetworkError, DistStoreError, timeouts
        raise PeerError(f"rank {rank}: rendezvous: could not reach rank 0's store at {where} "
                        f"within {timeout:g} s: rank 0 died before joining or was never "
                        f"started; {_HINT} ({_first_line(error)})") from error
    prefix = f"gnnforge/rendezvous/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    deadline = time.monotonic() + timeout
    try:
        store.set(f"{prefix}/{rank}", "joined")
        while True:
            missing = [r for r in range(world_size) if not store.check([f"{prefix}/{r}"])]
            if not missing:
                return store
            if time.monotonic() > deadline:
                raise PeerError(
                    f"rank {rank}: rendezvous at {where}: rank(s) {missing} of {world_size} "
                    f"did not join within {timeout:g} s: they died before joining or were "
                    f"never started; {_HINT}")
            time.sleep(0.05)
    except PeerError:
        raise
    except (RuntimeError, OSError) as error:  # the store host went away mid-rendezvous
        raise PeerError(f"rank {rank}: rendezvous at {where}: lost rank 0's store: rank 0 "
                        f"died while the ranks were joining ({_first_line(error)})") from error


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
