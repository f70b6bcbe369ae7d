"""SuiteSparse `.mat` files parsed by scipy in a child process, because scipy can segfault.

`scipy.io.loadmat` parses MATLAB v5 files in compiled code that trusts the file: a few
flipped bytes in a sparse variable kill the process that reads it (found by the mutation
fuzzer, tests/data/fuzz.py). So the parent never calls it. A child process loads the file,
copies out only what `read_mat_graph` uses (Problem.A's three compressed arrays and shape,
Problem.aux.coord, Problem.name and .kind) into a plain npz, and exits; the parent reads
that npz with allow_pickle=False and validates every array itself. A crash, a hang or an
error in the child is a DataFormatError naming the file. Cost: one interpreter start per
`.mat` read (numpy and scipy imports, under a second), once per dataset thanks to the
dataset cache. The child's code is `_mat_child.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gnnforge.data._errors import DataFormatError
from gnnforge.data._mat_expansion import check_mat_expansion

__all__ = ["load_mat_problem"]

_TIMEOUT_S = 600.0
# Run by path, so the child imports numpy and scipy only (not gnnforge, not torch).
_CHILD = Path(__file__).with_name("_mat_child.py")


def load_mat_problem(path: str | Path) -> dict[str, Any]:
    """The parts of a SuiteSparse `.mat` file's `Problem` struct, read in a child process.

    Returns:
        A_data, A_indices, A_indptr, A_shape (Problem.A as CSC arrays, not yet checked);
        coord (Problem.aux.coord, when present); name, kind (strings, when present).

    Raises:
        DataFormatError: the child crashed, hung or found no usable `Problem` struct, or
            the file's compressed variables inflate past the decompression cap.
    """
    path = Path(path)
    check_mat_expansion(path)  # the child inflates whole: bound it before it starts
    with tempfile.TemporaryDirectory(prefix="gnnforge-mat-") as folder:
        out = Path(folder) / "parts.npz"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            result = subprocess.run([sys.executable, str(_CHILD), str(path), str(out)],
                                    capture_output=True, text=True, timeout=_TIMEOUT_S,
                                    env=env)
        except subprocess.TimeoutExpired:
            raise DataFormatError(path, f"scipy.io.loadmat did not finish within "
                                  f"{_TIMEOUT_S:.0f} s (a malformed MATLAB file)") from None
        if result.returncode < 0:
            raise DataFormatError(path, f"scipy.io.loadmat crashed reading it (signal "
                                  f"{-result.returncode}): a malformed MATLAB file")
        problem = [line for line in result.stdout.splitlines() if line.startswith("PROBLEM ")]
        if problem:
            raise DataFormatError(path, json.loads(problem[-1].removeprefix("PROBLEM ")))
        if result.returncode != 0 or not out.exists():
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataFormatError(path, f"reading it failed in the child process ({tail})")
        with np.load(out, allow_pickle=False) as stored:
            parts = {name: stored[name] for name in stored.files}
    for text in ("name", "kind"):
        if text in parts:
            parts[text] = str(parts[text])
    return parts
