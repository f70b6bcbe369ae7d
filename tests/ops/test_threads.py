"""numba's kernels follow torch's thread count and never change it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._timeouts import SUBPROCESS_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("edges", [10, 40_000])  # one-thread and parallel call paths
def test_a_numba_op_keeps_torch_at_one_thread_under_omp_num_threads_1(edges):
    script = (
        "import torch\n"
        "from gnnforge import ops\n"
        "from gnnforge.data import rmat\n"
        "before = torch.get_num_threads()\n"
        f"g = rmat(scale=12, num_edges={edges}, seed=0)\n"
        "with ops.use_backend('numba'):\n"
        "    ops.copy_u_sum(g, torch.randn(g.num_nodes, 64))\n"
        "print(before, torch.get_num_threads())\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    env.pop("NUMBA_NUM_THREADS", None)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "1"]


def test_numba_uses_torchs_thread_count():
    import numba
    import torch

    from gnnforge.ops._cpu import _numba_threads

    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _numba_threads() == 1
        torch.set_num_threads(2)
        assert _numba_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
    finally:
        torch.set_num_threads(previous)
