"""A rank that never joins is named within the rendezvous timeout (default 120 s, here 3 s),
instead of the survivor waiting for the 600 s collective timeout and a raw store error."""

from __future__ import annotations

import time

import pytest

from gnnforge.distributed import free_port, spawn
from tests.isolated import run_isolated

pytestmark = pytest.mark.distributed

_ALONE = """
import os, sys
from gnnforge.distributed import PeerError, init_from_env
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK=sys.argv[2],
                  WORLD_SIZE="2", GNNFORGE_RENDEZVOUS_TIMEOUT="3")
try:
    init_from_env(timeout_s=600.0, backend="gloo")
except PeerError as error:
    print("CLEAN-ERROR:", error)
"""


@pytest.mark.parametrize("rank, missing", [(0, "rank(s) [1]"), (1, "rank 0")])
def test_a_rank_that_never_joins_is_named(rank, missing):
    start = time.monotonic()
    result = run_isolated(_ALONE, str(free_port()), str(rank), timeout=90)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("CLEAN-ERROR")]
    assert lines, result.stdout + result.stderr[-2000:]
    assert missing in lines[0] and "within 3 s" in lines[0]
    assert "GNNFORGE_RENDEZVOUS_TIMEOUT" in lines[0]
    assert elapsed < 60  # 3 s of waiting plus interpreter start-up on a loaded machine


def _sum_of_ranks(rank, world_size):
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(rank)])
    dist.all_reduce(value)
    return float(value)


def test_ranks_that_join_still_communicate():
    results = spawn(_sum_of_ranks, 2, timeout_s=90)
    assert [r.error for r in results] == [None, None]
    assert [r.value for r in results] == [1.0, 1.0]


def test_rendezvous_timeout_from_the_environment(monkeypatch):
    from gnnforge.distributed import rendezvous_timeout

    assert rendezvous_timeout() == 120.0
    monkeypatch.setenv("GNNFORGE_RENDEZVOUS_TIMEOUT", "7.5")
    assert rendezvous_timeout() == 7.5
    assert rendezvous_timeout(2.0) == 2.0
    monkeypatch.setenv("GNNFORGE_RENDEZVOUS_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="GNNFORGE_RENDEZVOUS_TIMEOUT must be a number of "
                                         "seconds > 0, got 'soon'"):
        rendezvous_timeout()
