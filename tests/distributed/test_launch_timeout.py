"""`spawn` says why a rank has no value: it timed out, or it died without reporting."""

from __future__ import annotations

import os
import time

import pytest

from gnnforge.distributed import spawn


def _sleeps_or_exits(rank, world_size, mode):
    if mode == "exit":
        os._exit(7)
    time.sleep(600)


@pytest.mark.distributed
def test_a_rank_past_the_deadline_is_reported_as_timed_out():
    (result,) = spawn(_sleeps_or_exits, 1, args=("sleep",), timeout_s=20)
    assert result.timed_out and result.value is None
    assert "timed out" in result.error and "timeout_s=20" in result.error


@pytest.mark.distributed
def test_a_rank_that_died_says_its_exit_code():
    (result,) = spawn(_sleeps_or_exits, 1, args=("exit",), timeout_s=300)
    assert not result.timed_out and result.exitcode == 7
    assert "exited with code 7 without reporting" in result.error
